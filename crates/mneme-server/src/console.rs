//! The web console (`GET /`): one self-contained page, served from the binary, that reads
//! the daemon's JSON API: memories (search with score parts, browse by type, scope, tag and
//! sensitivity), a record's lineage graph, audit log and salience curve, the daemon's
//! status, the relay's feed and analyses (polled live), reflection and inner life. No build
//! step and no CDN: the page is `console/index.html`, HTML, CSS and script in one file.

/// The page.
pub const PAGE: &str = include_str!("console/index.html");
