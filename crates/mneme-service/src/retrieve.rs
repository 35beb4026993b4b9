//! Retrieval: hybrid candidates (the top BM25 matches from FTS5 and, when a model is
//! attached, the nearest records by embedding), or for an empty query the most salient
//! and most recent records, re-ranked by `mneme_core::scoring`.
//!
//! With a query, the top `max(candidate_pool, 5 × limit)` BM25 matches and the
//! `dense_pool` nearest neighbours are re-ranked; a record outside both pools cannot win
//! on salience alone (a deliberate bound on work). Every candidate gets both relevance
//! parts: a dense-only candidate scores 0 lexically, a lexical-only candidate gets its
//! cosine from the index. The dense pool is filtered by the same SQL as the lexical one,
//! after the nearest-neighbour search (so a very narrow filter sees fewer dense hits).
//! A word matching more than `max_term_matches` records is not scored over all its
//! matches: BM25 runs over the query's rarer words and the frequent ones are estimated
//! from their newest matches (`mneme-store/src/search.rs`), which bounds a query's work
//! on a large store; below the cap nothing changes.
//! Without a query, the ranking is exact: candidates come from the per-type salience
//! index and the recency index, and the pool grows until no unseen record could beat
//! the k-th result (Fagin's threshold argument).

use std::collections::{HashMap, HashSet};

use mneme_core::query::{fts5_any, retrieval_tokens};
use mneme_core::scoring::ScoreParts;
use mneme_core::validate::check_unit;
use mneme_core::{MemoryType, Scope};
use mneme_store::{Candidate, ReadTx, RecordFilter};

use crate::{Access, Hit, MemoryService, RetrieveRequest, ServiceError, ServiceResult};

impl MemoryService {
    /// Ranked records for a query and filters, never above the caller's access.
    pub fn retrieve(&self, request: &RetrieveRequest, access: &Access) -> ServiceResult<Vec<Hit>> {
        self.config.limits.check_query(&request.query, request.limit)?;
        if let Some(m) = request.min_salience {
            check_unit("min salience", m)?;
        }
        self.config.limits.check_tags(&request.tags)?;
        let filter = self.effective_filter(request, access);
        let now = self.now();
        let min_salience = request.min_salience.unwrap_or(0.0);
        let tokens = retrieval_tokens(&request.query);
        // The user's own questions are not memories unless asked for by their tag: rank
        // twice the limit, so that dropping them still leaves `limit` answers.
        let hide_questions = !request.tags.iter().any(|t| t == mneme_core::QUESTION_TAG);
        let want = if hide_questions { request.limit.saturating_mul(2).min(self.config.limits.max_limit) } else { request.limit };
        // Embed before taking a connection: the model takes milliseconds.
        let query_vector = if request.query.trim().is_empty() { None } else { self.query_vector(&request.query) };
        let slots = self.asked_slots(&request.query, query_vector.as_deref());
        self.reader()?.read(|tx| {
            let mut scored = if tokens.is_empty() && query_vector.is_none() {
                self.by_salience_and_recency(tx, &filter, want, min_salience, now)?
            } else {
                let query = Query { text: &request.query, tokens: &tokens, vector: query_vector.as_deref(), slots: &slots };
                self.hybrid(tx, &query, &filter, (request.limit, want), min_salience, now)?
            };
            let floor = self.config.retrieval.min_score;
            scored.retain(|(_, s)| s.score >= floor);
            let seqs: Vec<i64> = scored.iter().map(|(c, _)| c.seq).collect();
            let records = tx.get_many(&seqs)?;
            let mut hits: Vec<Hit> = records
                .into_iter()
                .zip(scored)
                .map(|(record, (_, score))| Hit { record, current_salience: score.salience, score, outdated: None })
                .filter(|h| !hide_questions || !h.record.tags.iter().any(|t| t == mneme_core::QUESTION_TAG))
                .collect();
            if !request.query.trim().is_empty() {
                self.calibrate(&mut hits, &request.query, query_vector.is_some());
            }
            if !slots.is_empty() {
                // A question about the user's facts: the assistant's words are not
                // evidence of them ("Postgres would also work"), so they come last; a fact
                // of a slot the query does not ask about ("hosted on Vercel" for the
                // database), or about someone else when the query asks about the user
                // ("Henrik has pet Bramble" for "the user's pet"), answers something else,
                // so it comes after the user's own words (stable: the order is kept).
                let about_user = mneme_truth::asks_about_speaker(&request.query);
                hits.sort_by_cached_key(|h| off_question(&h.record, &slots, about_user));
            }
            self.yield_to_newer_statements(tx, &mut hits, &filter)?;
            hits.truncate(request.limit);
            self.mark_outdated(tx, &mut hits, &filter)?;
            Ok::<_, ServiceError>(hits)
        })
    }

    /// Each hit's calibrated relevance (`relevance.rs`); hits below
    /// `retrieval.min_relevant` leave, except live facts of a slot the query asks about.
    fn calibrate(&self, hits: &mut Vec<Hit>, query: &str, model: bool) {
        let words = mneme_core::lexemes::lexeme_set(query);
        for h in hits.iter_mut() {
            let text = h.record.payload.as_ref().map_or_else(|| h.record.summary.clone(), |p| p.search_text());
            let coverage = crate::relevance::coverage(&words, &text);
            h.score.coverage = coverage;
            h.score.relevant = Some(crate::relevance::probability(h.score.cosine, coverage.unwrap_or(0.0), model));
        }
        let floor = self.config.retrieval.min_relevant;
        hits.retain(|h| h.score.slot.is_some() || h.score.relevant.is_none_or(|p| p >= floor));
    }

    /// The newest records that pass the request's filters, newest first, without
    /// ranking (`query` is ignored): what the heartbeat's setup reads as "the last N
    /// events". Never above the caller's access.
    pub fn recent(&self, request: &RetrieveRequest, access: &Access) -> ServiceResult<Vec<mneme_core::MemoryRecord>> {
        self.config.limits.check_query("", request.limit)?;
        self.config.limits.check_tags(&request.tags)?;
        let filter = self.effective_filter(request, access);
        self.reader()?.read(|tx| {
            let seqs: Vec<i64> = tx.newest_candidates(&filter, request.limit)?.iter().map(|c| c.seq).collect();
            Ok::<_, ServiceError>(tx.get_many(&seqs)?)
        })
    }

    /// The request's filters, narrowed to what `access` allows.
    /// Live facts (`slot:<id>` tags, written by the conversation extractor) of the
    /// slots `query` asks about (`mneme_truth::question_slots`, and the topic layer's
    /// answer for the query's vector), within `filter`, with their boost: the full
    /// `slot_boost` for facts about the user (`about:user`), half for facts about others.
    /// With the topic layer, the user's own statements about those slots join too
    /// (`topic_statements`): a statement the extractor read no fact from still answers.
    fn slot_candidates(&self, tx: &ReadTx<'_>, query: &Query<'_>, filter: &RecordFilter, n: usize) -> ServiceResult<HashMap<i64, f64>> {
        let mut out = HashMap::new();
        let boost = self.config.retrieval.slot_boost;
        if boost <= 0.0 {
            return Ok(out);
        }
        for &slot in query.slots {
            if filter.types.is_empty() || filter.types.contains(&MemoryType::Episodic) {
                out.extend(self.topic_statements(tx, slot, filter)?);
            }
            if !(filter.types.is_empty() || filter.types.contains(&MemoryType::Semantic)) {
                continue;
            }
            let mut f = filter.clone();
            f.types = vec![MemoryType::Semantic];
            f.tags.push(format!("slot:{slot}"));
            // Facts about others ("the user's sister lives in Rome") get half the boost.
            out.extend(tx.salience_candidates(MemoryType::Semantic, &f, n)?.into_iter().map(|c| (c.seq, boost / 2.0)));
            f.tags.push("about:user".into());
            out.extend(tx.salience_candidates(MemoryType::Semantic, &f, n)?.into_iter().map(|c| (c.seq, boost)));
        }
        Ok(out)
    }

    /// The user's statements (events of the user's messages, `role:user`, not questions,
    /// not telling of someone else: `mneme_truth::tells_of_someone_else`) that the topic
    /// layer puts in `slot`, found by searching the index with the slot's weight
    /// vector, with a boost below a fact's: `TOPIC_SHARE` of `slot_boost` for the newest,
    /// down to half of that for the oldest, so the newest words on a topic come first
    /// when no fact answers and a live fact still outranks what it was read from.
    fn topic_statements(&self, tx: &ReadTx<'_>, slot: &str, filter: &RecordFilter) -> ServiceResult<Vec<(i64, f64)>> {
        let min = self.config.retrieval.topic_min_p as f32;
        let Some(layer) = self.topic_layer().filter(|_| min < 1.0) else { return Ok(Vec::new()) };
        let Some((direction, _)) = layer.classes.iter().position(|c| c == slot).map(|i| layer.direction(i)) else { return Ok(Vec::new()) };
        let near: Vec<i64> = self.nearest(tx, &direction, TOPIC_POOL)?.into_iter().map(|(seq, _)| seq).collect();
        let events = RecordFilter { types: vec![MemoryType::Episodic], ..filter.clone() };
        let seqs: Vec<i64> = tx.candidates_by_seq(&near, &events)?.into_iter().map(|c| c.seq).collect();
        let on_topic: Vec<i64> = seqs
            .iter()
            .zip(self.topics_of(&seqs))
            .filter(|(_, t)| t.is_some_and(|(s, p)| s == Some(slot) && p >= min))
            .map(|(seq, _)| *seq)
            .collect();
        let mut said: Vec<(jiff::Timestamp, i64)> = Vec::new();
        for (r, &seq) in tx.get_many(&on_topic)?.iter().zip(&on_topic) {
            let text = r.payload.as_ref().map(|p| p.own_text()).unwrap_or_default();
            if is_users(r) && !mneme_truth::tells_of_someone_else(&text) && !read_as_other(tx, r, slot)? {
                said.push((r.created_at, seq));
            }
        }
        said.sort();
        let top = self.config.retrieval.slot_boost * TOPIC_SHARE;
        let n = said.len().saturating_sub(1).max(1) as f64;
        Ok(said.into_iter().enumerate().map(|(rank, (_, seq))| (seq, top * (0.5 + 0.5 * rank as f64 / n))).collect())
    }

    /// The slots a query asks about: by its words (`mneme_truth::question_slots`) and by
    /// the topic layer's reading of its vector.
    fn asked_slots(&self, query: &str, vector: Option<&[f32]>) -> Vec<&'static str> {
        let mut slots = mneme_truth::question_slots(query);
        if let Some(slot) = vector.and_then(|v| self.topic(v)).filter(|s| !slots.contains(s)) {
            slots.push(slot);
        }
        slots
    }

    /// The slot a unit vector is about by the topic layer, when its probability reaches
    /// `retrieval.topic_min_p` (below 1).
    fn topic(&self, v: &[f32]) -> Option<&'static str> {
        let min = self.config.retrieval.topic_min_p as f32;
        if min >= 1.0 {
            return None;
        }
        self.topic_layer()?.classify(v).filter(|t| t.p >= min).and_then(|t| t.slot)
    }

    /// Fail safe: a fact ranked first for the slot a query asks about yields to a newer
    /// statement that names its value. Extraction may have missed a change ("we migrated
    /// our servers to Rackspace because UpCloud kept going down" after "hosted on
    /// UpCloud"): the newer words, with their date, come before the older fact. When the
    /// fact still holds the statement names its value too, so nothing true moves down.
    /// Questions, the assistant's words and the fact's own evidence do not count, except
    /// that a fact extraction is unsure of (confidence below `retrieval.sure_confidence`)
    /// yields to the message it was read from when nothing newer speaks to it: "is
    /// allergic to list" comes after "Add lanolin to my allergy list, sadly".
    /// A request for types without events (`--type semantic`) gets no statement: the fact
    /// stays where it ranked, marked as possibly outdated by the newer words.
    fn yield_to_newer_statements(&self, tx: &ReadTx<'_>, hits: &mut Vec<Hit>, filter: &RecordFilter) -> ServiceResult<()> {
        let boosted: Vec<usize> = hits.iter().enumerate().filter(|(_, h)| h.score.slot.is_some()).map(|(i, _)| i).collect();
        let events = filter.types.is_empty() || filter.types.contains(&MemoryType::Episodic);
        // Highest position first, so earlier indices stay valid as hits move.
        for at in boosted.into_iter().rev() {
            let Some(record) = self.newer_statement_in(tx, &hits[at].record, filter, true)? else { continue };
            if !events {
                // An unsure fact's own words put nothing in doubt.
                if !is_evidence(&hits[at].record, &record) {
                    hits[at].outdated = in_doubt(&hits[at].record, &record);
                }
                continue;
            }
            let (fact, score) = (hits[at].record.id.clone(), hits[at].score);
            hits.retain(|h| h.record.id != record.id);
            let at = hits.iter().position(|h| h.record.id == fact).unwrap_or(hits.len());
            hits.insert(at, Hit { current_salience: score.salience, record, score, outdated: None });
        }
        Ok(())
    }

    /// The newest statement after `fact` that names its value or, for a single-valued
    /// fact about the user, is about its slot by the topic layer (see
    /// `yield_to_newer_statements`), among the records `access` may read: what a context
    /// block shows beside a fact that may be outdated. Without one, for a fact below
    /// `retrieval.sure_confidence`, the message it was read from (`own_words`). `None` for
    /// a record that is not a fact.
    pub fn newer_statement(&self, fact: &mneme_core::MemoryRecord, access: &Access) -> ServiceResult<Option<mneme_core::MemoryRecord>> {
        let filter =
            self.effective_filter(&RetrieveRequest { max_sensitivity: Some(access.max_sensitivity), ..RetrieveRequest::default() }, access);
        self.reader()?.read(|tx| self.newer_statement_in(tx, fact, &filter, false))
    }

    /// `offered`: see [`MemoryService::newer_on_topic`].
    fn newer_statement_in(
        &self,
        tx: &ReadTx<'_>,
        fact: &mneme_core::MemoryRecord,
        filter: &RecordFilter,
        offered: bool,
    ) -> ServiceResult<Option<mneme_core::MemoryRecord>> {
        let named = newer_statement(tx, fact, filter)?;
        let on_topic = self.newer_on_topic(tx, fact, filter, offered)?;
        Ok(match (named, on_topic) {
            (Some(a), Some(b)) => Some(if b.created_at > a.created_at { b } else { a }),
            (Some(a), None) | (None, Some(a)) => Some(a),
            (None, None) => self.own_words(tx, fact, filter)?,
        })
    }

    /// The message a fact extraction is unsure of (confidence below
    /// `retrieval.sure_confidence`) was read from, when `filter` lets it be read: its
    /// words stand in the fact's place.
    fn own_words(
        &self,
        tx: &ReadTx<'_>,
        fact: &mneme_core::MemoryRecord,
        filter: &RecordFilter,
    ) -> ServiceResult<Option<mneme_core::MemoryRecord>> {
        let Some(mneme_core::Payload::Semantic(f)) = &fact.payload else { return Ok(None) };
        if fact.confidence >= self.config.retrieval.sure_confidence {
            return Ok(None);
        }
        let ids: Vec<mneme_core::RecordId> = f.evidence.iter().filter_map(|e| mneme_core::RecordId::parse(e).ok()).collect();
        let seqs: Vec<i64> = tx.seqs_of(&ids.iter().collect::<Vec<_>>())?.into_values().collect();
        let events = RecordFilter { types: vec![MemoryType::Episodic], ..filter.clone() };
        let seqs: Vec<i64> = tx.candidates_by_seq(&seqs, &events)?.into_iter().map(|c| c.seq).collect();
        Ok(tx.get_many(&seqs)?.into_iter().max_by_key(|r| r.created_at))
    }

    /// The newest statement of the user's (`role:user`) after a single-valued fact about the user that the topic
    /// layer puts in the fact's slot (with the model), or that names another known value of
    /// the slot (`mneme_truth::named_values`, with or without it): a change the extractor
    /// did not read ("been in portland about 6 yrs now" after "I live in Austin"). Looks
    /// at the newest `TOPIC_WINDOW` events after the fact. With `offered` (what a fact
    /// yields its rank to), a statement the topic layer reads must also offer a value of
    /// the slot by the span reader (`MemoryService::offers_value`): "rephrase 'thank you
    /// for your patience' to be warmer" is near "city" for the topic layer, but a fact
    /// ranked below it answers nothing; a context block still quotes it beside the fact.
    pub(crate) fn newer_on_topic(
        &self,
        tx: &ReadTx<'_>,
        fact: &mneme_core::MemoryRecord,
        filter: &RecordFilter,
        offered: bool,
    ) -> ServiceResult<Option<mneme_core::MemoryRecord>> {
        let Some(mneme_core::Payload::Semantic(f)) = &fact.payload else { return Ok(None) };
        let min = self.config.retrieval.topic_min_p as f32;
        let slot = fact.tags.iter().find_map(|t| t.strip_prefix("slot:"));
        let single = slot.and_then(mneme_truth::slot).is_some_and(|d| d.kind == mneme_truth::SlotKind::Single);
        // The topic layer reads every slot (with the model); a slot with known values (a
        // gazetteer) is also read by the values a statement names, with or without it.
        let layer = min < 1.0 && self.topic_layer().is_some();
        let typed = slot.and_then(mneme_truth::slot).is_some_and(|d| !d.gazetteer.is_empty());
        if !single || !fact.tags.iter().any(|t| t == "about:user") || !(layer || typed) {
            return Ok(None);
        }
        let since = f.valid_from.unwrap_or(fact.created_at);
        let events =
            RecordFilter { types: vec![MemoryType::Episodic], since: Some(filter.since.map_or(since, |s| s.max(since))), ..filter.clone() };
        let seqs: Vec<i64> = tx.newest_candidates(&events, TOPIC_WINDOW)?.iter().map(|c| c.seq).collect();
        let on_topic: HashSet<i64> = if layer {
            seqs.iter()
                .zip(self.topics_of(&seqs))
                .filter(|(_, t)| t.is_some_and(|(s, p)| s == slot && p >= min))
                .map(|(seq, _)| *seq)
                .collect()
        } else {
            HashSet::new()
        };
        let value = mneme_truth::normalize_value(&f.object);
        let read: Vec<i64> = if typed { seqs.clone() } else { seqs.iter().copied().filter(|s| on_topic.contains(s)).collect() };
        // Newest first, so the first that qualifies is the answer (and the span reader,
        // with `offered`, reads no older statement).
        let mut records: Vec<(mneme_core::MemoryRecord, &i64)> = tx.get_many(&read)?.into_iter().zip(&read).collect();
        records.sort_by_key(|(r, _)| std::cmp::Reverse(r.created_at));
        for (r, seq) in records {
            let said = match &r.payload {
                Some(mneme_core::Payload::Event(e)) => e.event_time.unwrap_or(r.created_at),
                _ => continue,
            };
            let text = r.payload.as_ref().map(|p| p.own_text()).unwrap_or_default();
            // Or it names another known value of the slot and not the fact's ("Learning
            // curve on Zig is steep but it's what I use daily now" after "I code in Dart"):
            // the encoder does not know every language, database or diet by name.
            let names_another = || {
                let named: Vec<String> =
                    mneme_truth::named_values(&text, slot.unwrap_or_default()).iter().map(|v| mneme_truth::normalize_value(v)).collect();
                !named.is_empty() && !named.contains(&value)
            };
            // What only supposes ("If we ever get a second cat I'm calling her Clementine")
            // or tells of someone else ("Dariusz wrote a whole game engine in Lua") changes
            // nothing.
            let changes_nothing = || mneme_truth::asserts_nothing(&text) || mneme_truth::tells_of_someone_else(&text);
            if said > since
                && !is_evidence(fact, &r)
                && is_users(&r)
                && ((on_topic.contains(seq) && (!offered || self.offers_value(&text, slot.unwrap_or_default(), &f.object) != Some(false)))
                    || names_another())
                && !changes_nothing()
                && !read_as_other(tx, &r, slot.unwrap_or_default())?
            {
                return Ok(Some(r));
            }
        }
        Ok(None)
    }

    /// The newest statement of the user's that the topic layer puts in `slot`, among the
    /// records `access` may read, if extraction read no fact from it: what a context block
    /// quotes for a slot no fact states.
    /// `None` without the model (or the layer), or when nothing was said about it.
    pub fn topic_statement(&self, slot: &str, access: &Access) -> ServiceResult<Option<mneme_core::MemoryRecord>> {
        if self.topic_layer().is_none() {
            return Ok(None);
        }
        let filter =
            self.effective_filter(&RetrieveRequest { max_sensitivity: Some(access.max_sensitivity), ..RetrieveRequest::default() }, access);
        self.reader()?.read(|tx| {
            let newest = self.topic_statements(tx, slot, &filter)?.into_iter().max_by(|a, b| a.1.total_cmp(&b.1));
            let Some((seq, _)) = newest else { return Ok::<_, ServiceError>(None) };
            let Some(r) = tx.get_many(&[seq])?.into_iter().next() else { return Ok(None) };
            // "Not recorded as a fact" must be true: extraction read nothing from it.
            Ok(if tx.derived_from(&r.id)?.is_empty() { Some(r) } else { None })
        })
    }

    fn effective_filter(&self, request: &RetrieveRequest, access: &Access) -> RecordFilter {
        let asked = request.max_sensitivity.unwrap_or(self.config.access.default_max_sensitivity);
        let scopes = match (&access.scopes, &request.scopes) {
            (None, None) if request.own_scopes => Some(Vec::new()),
            (None, None) => None,
            (None, Some(r)) => Some(r.clone()),
            (Some(a), None) => Some(a.clone()),
            (Some(a), Some(r)) => Some(r.iter().filter(|s| s.is_global() || a.contains(s)).cloned().collect::<Vec<Scope>>()),
        };
        let mut types = request.types.clone();
        types.sort();
        types.dedup();
        RecordFilter {
            types,
            max_sensitivity: asked.min(access.max_sensitivity),
            scopes,
            tags: request.tags.clone(),
            since: request.since,
            until: request.until,
            include_tombstones: request.include_tombstones,
        }
    }

    /// `limit` sizes the pools and the neighbour pass; `keep ≥ limit` is how many ranked
    /// answers leave (the caller drops some).
    fn hybrid(
        &self,
        tx: &ReadTx<'_>,
        query: &Query<'_>,
        filter: &RecordFilter,
        (limit, keep): (usize, usize),
        min_salience: f64,
        now: jiff::Timestamp,
    ) -> ServiceResult<Vec<(Candidate, ScoreParts)>> {
        let weights = self.config.retrieval;
        let pool = weights.candidate_pool.max(limit.saturating_mul(5));
        let mut candidates: HashMap<i64, (Candidate, Option<f64>)> = HashMap::new();
        let columns = (weights.context_weight, weights.date_weight);
        let lexical = match (weights.max_term_matches, fts5_any(query.tokens)) {
            (_, None) => Vec::new(),
            (0, Some(expr)) => tx.lexical_candidates(&expr, filter, pool, columns)?,
            (cap, Some(_)) => tx.bounded_lexical_candidates(query.tokens, filter, pool, columns, cap)?,
        };
        for c in lexical {
            candidates.insert(c.seq, (c, None));
        }
        // Live facts of the slots the query asks about join the candidates however few
        // words they share with it ("where does the user live?" → "Ana lives in Porto").
        let slot_seqs = self.slot_candidates(tx, query, filter, pool)?;
        for c in tx.candidates_by_seq(&slot_seqs.keys().copied().collect::<Vec<_>>(), filter)? {
            candidates.entry(c.seq).or_insert((c, None));
        }
        let best_bm25 = candidates.values().filter_map(|(c, _)| c.bm25).fold(0.0f64, f64::max);
        // Dense part: min-max normalised over the nearest neighbours.
        let mut dense_range = None;
        if let Some(q) = query.vector {
            let near = self.nearest(tx, q, weights.dense_pool.max(limit))?;
            if let (Some(hi), Some(lo)) = (near.first(), near.last()) {
                dense_range = Some((f64::from(lo.1), f64::from(hi.1)));
            }
            let seqs: Vec<i64> = near.iter().map(|(s, _)| *s).collect();
            let cosine: HashMap<i64, f32> = near.into_iter().collect();
            for c in tx.candidates_by_seq(&seqs, filter)? {
                let cos = cosine.get(&c.seq).map(|&x| f64::from(x));
                candidates.entry(c.seq).or_insert((c, None)).1 = cos;
            }
            // Lexical-only candidates: their cosine from the index, in one pass.
            let missing: Vec<i64> = candidates.iter().filter(|(_, (_, cos))| cos.is_none()).map(|(seq, _)| *seq).collect();
            for (seq, cos) in missing.iter().zip(self.similarities_to(q, &missing)) {
                if let Some(entry) = candidates.get_mut(seq) {
                    entry.1 = cos.map(f64::from);
                }
            }
        }
        // Nothing relevant is nothing: a nearest neighbour that shares no word with the
        // query and is not a fact it asks about must be close in meaning on its own.
        candidates.retain(|seq, (c, cosine)| {
            c.bm25.is_some() || slot_seqs.contains_key(seq) || cosine.is_none_or(|cos| cos >= weights.min_cosine)
        });
        let seqs: Vec<i64> = candidates.keys().copied().collect();
        let named = if weights.speaker_boost > 0.0 { named_senders(tx, &seqs, query.text)? } else { HashSet::new() };
        let mut parts: HashMap<i64, (Candidate, Relevance)> = candidates
            .into_values()
            .map(|(c, cosine)| {
                let bm25 = c.bm25;
                let lexical = match bm25 {
                    Some(b) if best_bm25 > 0.0 => (b / best_bm25).clamp(0.0, 1.0),
                    _ => 0.0,
                };
                // A record without a vector yet (written, not yet reached by the backfill)
                // ranks by its words alone: its dense part is its lexical part, never 0.
                let dense = dense_range.map(|(lo, hi)| match cosine {
                    Some(cos) if hi > lo => ((cos - lo) / (hi - lo)).clamp(0.0, 1.0),
                    Some(_) => 1.0,
                    None => lexical,
                });
                // The speaker boost needs a match of its own: a record whose text barely
                // matches (a frequent word, lexical 1e-6) does not ride into the top on
                // its sender's name alone.
                let matched = weights.fuse(lexical, dense) >= MIN_MATCH_FOR_SPEAKER;
                let speaker = (named.contains(&c.seq) && matched).then_some(weights.speaker_boost);
                let relevance = weights.fuse(lexical, dense) + speaker.unwrap_or(0.0);
                let slot = slot_seqs.get(&c.seq).copied().filter(|b| *b > 0.0);
                (c.seq, (c, Relevance { relevance, bm25, lexical, cosine, dense, speaker, neighbour: None, slot, newness: None }))
            })
            .collect();
        // Normalise to the best candidate, then let each record inherit a share of its
        // best conversation neighbour's relevance (the answer follows the question).
        let best = parts.values().map(|(_, r)| r.relevance).fold(0.0f64, f64::max);
        if best > 0.0 {
            parts.values_mut().for_each(|(_, r)| r.relevance /= best);
        }
        if weights.neighbour_share > 0.0 {
            self.inherit_from_neighbours(tx, &mut parts, filter, limit)?;
        }
        if weights.present_boost > 0.0 && about_the_present(query.text) {
            // Newness: each candidate's rank by time, newest 1, oldest 0.
            let mut by_time: Vec<(jiff::Timestamp, i64)> = parts.values().map(|(c, _)| (c.sort_time, c.seq)).collect();
            by_time.sort();
            let n = by_time.len().saturating_sub(1).max(1) as f64;
            for (rank, (_, seq)) in by_time.into_iter().enumerate() {
                if let Some((_, r)) = parts.get_mut(&seq) {
                    r.newness = Some(rank as f64 / n);
                }
            }
        }
        let mut scored: Vec<(Candidate, ScoreParts)> =
            parts.into_values().filter_map(|(c, relevance)| self.score(c, Some(relevance), min_salience, now)).collect();
        if weights.mmr_lambda < 1.0 && self.semantic.get().is_some() {
            sort_and_cut(&mut scored, limit.saturating_mul(3).max(keep));
            scored = self.mmr(scored, keep, weights.mmr_lambda);
        } else {
            sort_and_cut(&mut scored, keep);
        }
        Ok(scored)
    }

    /// `relevance = (own + α·max(own of the thread neighbours)) / (1 + α)`. Only the best
    /// candidates pass relevance on (a weak one has little to give); a neighbour that was
    /// not a candidate joins with own relevance 0 if the filter admits it.
    fn inherit_from_neighbours(
        &self,
        tx: &ReadTx<'_>,
        parts: &mut HashMap<i64, (Candidate, Relevance)>,
        filter: &RecordFilter,
        limit: usize,
    ) -> ServiceResult<()> {
        let alpha = self.config.retrieval.neighbour_share;
        let mut sources: Vec<(i64, f64)> = parts.iter().map(|(seq, (_, r))| (*seq, r.relevance)).collect();
        sources.sort_by(|a, b| b.1.total_cmp(&a.1).then(b.0.cmp(&a.0)));
        sources.truncate(limit.saturating_mul(3).max(30));
        let source_seqs: Vec<i64> = sources.iter().map(|(s, _)| *s).collect();
        let adjacent = tx.thread_adjacent(&source_seqs)?;
        let mut inherited: HashMap<i64, f64> = HashMap::new();
        for (seq, own) in &sources {
            if let Some((before, after)) = adjacent.get(seq) {
                for n in [before, after].into_iter().flatten() {
                    let best = inherited.entry(*n).or_insert(0.0);
                    *best = best.max(*own);
                }
            }
        }
        let newcomers: Vec<i64> = inherited.keys().filter(|s| !parts.contains_key(s)).copied().collect();
        for c in tx.candidates_by_seq(&newcomers, filter)? {
            let relevance = Relevance {
                relevance: 0.0,
                bm25: None,
                lexical: 0.0,
                cosine: None,
                dense: None,
                speaker: None,
                neighbour: None,
                slot: None,
                newness: None,
            };
            parts.insert(c.seq, (c, relevance));
        }
        for (seq, (_, r)) in parts.iter_mut() {
            let from = inherited.get(seq).copied().unwrap_or(0.0);
            r.neighbour = Some(alpha * from);
            r.relevance = (r.relevance + alpha * from) / (1.0 + alpha);
        }
        Ok(())
    }

    /// Maximal marginal relevance: repeatedly takes the candidate with the best
    /// `λ·score − (1−λ)·max cosine to an already chosen hit`.
    fn mmr(&self, mut pool: Vec<(Candidate, ScoreParts)>, limit: usize, lambda: f64) -> Vec<(Candidate, ScoreParts)> {
        let mut chosen: Vec<(Candidate, ScoreParts)> = Vec::with_capacity(limit);
        while chosen.len() < limit && !pool.is_empty() {
            let value = |(c, s): &(Candidate, ScoreParts)| {
                let redundancy = chosen.iter().filter_map(|(o, _)| self.similarity(c.seq, o.seq)).fold(0.0f64, |m, x| m.max(f64::from(x)));
                lambda * s.score - (1.0 - lambda) * redundancy
            };
            let best = (0..pool.len()).max_by(|&a, &b| value(&pool[a]).total_cmp(&value(&pool[b])).then(b.cmp(&a))).unwrap_or(0);
            chosen.push(pool.remove(best));
        }
        chosen
    }

    fn by_salience_and_recency(
        &self,
        tx: &ReadTx<'_>,
        filter: &RecordFilter,
        limit: usize,
        min_salience: f64,
        now: jiff::Timestamp,
    ) -> ServiceResult<Vec<(Candidate, ScoreParts)>> {
        let weights = self.config.retrieval;
        let decay = self.config.decay;
        let types: Vec<MemoryType> = if filter.types.is_empty() { MemoryType::ALL.to_vec() } else { filter.types.clone() };
        let mut n = limit.saturating_mul(4).max(32);
        loop {
            let mut pool: HashMap<i64, Candidate> = HashMap::new();
            // Per type whose list was cut off: (salience bound, recency is unbounded), for
            // the records not seen yet. Pinned records sort first in the salience list, so
            // a list ending on a pinned record may hide more pinned (ageless) ones.
            let mut cut_types: Vec<(MemoryType, f64, bool)> = Vec::new();
            for &t in &types {
                let list = tx.salience_candidates(t, filter, n)?;
                if list.len() == n {
                    let last = list.last().expect("a full list is not empty");
                    let bound = decay.salience_at(t, &last.salience, now).max(decay.floor.get(t));
                    cut_types.push((t, bound, last.salience.pinned || weights.evergreen.contains(t)));
                }
                pool.extend(list.into_iter().map(|c| (c.seq, c)));
            }
            let recent = tx.recent_candidates(filter, n)?;
            let recency_bound =
                (recent.len() == n).then(|| weights.recency(recent.last().expect("a full list is not empty").sort_time, now));
            pool.extend(recent.into_iter().map(|c| (c.seq, c)));
            let mut scored: Vec<(Candidate, ScoreParts)> =
                pool.into_values().filter_map(|c| self.score(c, None, min_salience, now)).collect();
            sort_and_cut(&mut scored, limit);
            // No unseen record can score above this (every record was seen if either the
            // recency list or every salience list came back short).
            let unseen_bound = match recency_bound {
                None => None,
                Some(rb) => cut_types
                    .iter()
                    .map(|&(_, sal, ageless)| weights.salience * sal + weights.recency * if ageless { 1.0 } else { rb })
                    .reduce(f64::max),
            };
            let settled = match unseen_bound {
                None => true,
                Some(b) => scored.len() == limit && scored.last().is_some_and(|(_, s)| s.score >= b),
            };
            if settled || n >= 1 << 20 {
                return Ok(scored);
            }
            n = n.saturating_mul(4);
        }
    }

    /// Scores one candidate; `None` when its current salience is below `min_salience`.
    /// `relevance` is absent for an empty query.
    fn score(
        &self,
        c: Candidate,
        relevance: Option<Relevance>,
        min_salience: f64,
        now: jiff::Timestamp,
    ) -> Option<(Candidate, ScoreParts)> {
        let weights = &self.config.retrieval;
        let salience = self.config.decay.salience_at(c.memory_type, &c.salience, now);
        if salience < min_salience {
            return None;
        }
        let recency = weights.recency_of(c.memory_type, c.salience.pinned, c.sort_time, now);
        let slot = relevance.and_then(|r| r.slot);
        let present = relevance.and_then(|r| r.newness.map(|n| weights.present_boost * r.relevance * n));
        let score = weights.blend(relevance.map(|r| r.relevance), salience, recency) + slot.unwrap_or(0.0) + present.unwrap_or(0.0);
        Some((
            c,
            ScoreParts {
                score,
                relevance: relevance.map(|r| r.relevance),
                bm25: relevance.and_then(|r| r.bm25),
                lexical: relevance.map(|r| r.lexical),
                cosine: relevance.and_then(|r| r.cosine),
                dense: relevance.and_then(|r| r.dense),
                speaker: relevance.and_then(|r| r.speaker),
                neighbour: relevance.and_then(|r| r.neighbour),
                salience,
                recency,
                slot,
                present,
                coverage: None,
                relevant: None,
            },
        ))
    }
}

/// The relevance of one candidate to a text query, with its parts.
#[derive(Debug, Clone, Copy)]
struct Relevance {
    relevance: f64,
    bm25: Option<f64>,
    lexical: f64,
    cosine: Option<f64>,
    dense: Option<f64>,
    speaker: Option<f64>,
    neighbour: Option<f64>,
    /// The slot boost, for a live fact of a slot the query asks about.
    slot: Option<f64>,
    /// The candidate's rank by time (newest 1), for a question about the present.
    newness: Option<f64>,
}

/// A text query in its three forms.
#[derive(Debug)]
struct Query<'a> {
    text: &'a str,
    /// The searchable words (`mneme_core::query::retrieval_tokens`); empty without any.
    tokens: &'a [String],
    /// The query's embedding, when a model is attached.
    vector: Option<&'a [f32]>,
    /// The slots it asks about (`asked_slots`).
    slots: &'a [&'static str],
}

/// The fused relevance a record needs for the speaker boost to apply.
const MIN_MATCH_FOR_SPEAKER: f64 = 0.05;

/// A question about the present: no past-tense or "before" words ("where did they live
/// before?" asks about the past; "where does the user live?" about now).
fn about_the_present(query: &str) -> bool {
    const PAST: &[&str] = &[
        "was",
        "were",
        "did",
        "had",
        "used",
        "before",
        "previously",
        "originally",
        "earlier",
        "ago",
        "formerly",
        "former",
        "war",
        "waren",
        "hatte",
        "früher",
        "vorher",
        "damals",
        "zuerst",
    ];
    !words(query).any(|w| PAST.contains(&w.as_str()))
}

/// Lowercased alphanumeric words.
fn words(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).map(str::to_lowercase)
}

/// The candidates whose sender is named in the query (every word of the sender's name
/// appears as a word of the query).
fn named_senders(tx: &ReadTx<'_>, seqs: &[i64], query: &str) -> ServiceResult<HashSet<i64>> {
    let query_words: HashSet<String> = words(query).collect();
    if query_words.is_empty() {
        return Ok(HashSet::new());
    }
    let senders = tx.event_senders(seqs)?;
    Ok(senders
        .into_iter()
        .filter(|(_, sender)| {
            let mut name = words(sender).peekable();
            name.peek().is_some() && name.all(|w| query_words.contains(&w))
        })
        .map(|(seq, _)| seq)
        .collect())
}

/// Events a fact may yield to: not the assistant's words, not a question.
fn is_statement(r: &mneme_core::MemoryRecord) -> bool {
    !r.tags.iter().any(|t| t == "role:assistant" || t == mneme_core::QUESTION_TAG)
}

/// A statement in the user's own message (tagged `role:user` by the hooks, the path
/// facts are read from), not a question: what the topic layer may read as the user's.
pub(crate) fn is_users(r: &mneme_core::MemoryRecord) -> bool {
    is_statement(r) && r.tags.iter().any(|t| t == "role:user")
}

/// How far a hit is from answering a question about `slots`: 0 what may answer it, 1 a
/// fact of another slot, or about someone else than the question asks about (`about_user`:
/// `mneme_truth::asks_about_speaker`), or a message of the user's that asserts nothing
/// (`mneme_truth::asserts_nothing`: "If we ever get a second cat I'm calling her
/// Clementine"), 2 the assistant's words.
fn off_question(record: &mneme_core::MemoryRecord, slots: &[&str], about_user: Option<bool>) -> u8 {
    let tags = &record.tags;
    if tags.iter().any(|t| t == "role:assistant") {
        return 2;
    }
    if tags.iter().any(|t| t == "role:user") {
        let text = record.payload.as_ref().map(|p| p.own_text()).unwrap_or_default();
        return u8::from(mneme_truth::asserts_nothing(&text));
    }
    match tags.iter().find_map(|t| t.strip_prefix("slot:")) {
        // A project's facts ("Prod lives on UpCloud") are the user's whoever the extractor
        // took for their subject.
        Some(slot) => {
            let project = mneme_truth::slot(slot).is_some_and(|d| d.project);
            let users = tags.iter().any(|t| t == "about:user");
            u8::from(!slots.contains(&slot) || (!project && about_user.is_some_and(|u| u != users)))
        }
        None => 0,
    }
}

/// Did extraction read `statement` as something other than the user's `slot`: a fact of
/// another slot, or about someone else ("my sister moved to Denver")? Then the topic
/// layer's reading does not stand against the extractor's. A fact of no slot (the hooks'
/// first-person sentence kept as it was said) reads nothing against it.
fn read_as_other(tx: &ReadTx<'_>, statement: &mneme_core::MemoryRecord, slot: &str) -> ServiceResult<bool> {
    Ok(tx.derived_from(&statement.id)?.iter().any(|fact| {
        let slotted = fact.tags.iter().any(|t| t.starts_with("slot:"));
        let same_slot = fact.tags.iter().any(|t| t.strip_prefix("slot:") == Some(slot));
        slotted && !(same_slot && fact.tags.iter().any(|t| t == "about:user"))
    }))
}

/// How many of the newest events after a fact the topic layer reads for a change.
const TOPIC_WINDOW: usize = 64;

/// How many records nearest a slot's weight vector the topic layer reads for statements
/// about the slot.
const TOPIC_POOL: usize = 64;

/// A statement's topic boost, as a share of a fact's `slot_boost`.
const TOPIC_SHARE: f64 = 0.5;

fn sort_and_cut(scored: &mut Vec<(Candidate, ScoreParts)>, limit: usize) {
    // Ties go to the newer record (higher sequence number), so order is deterministic.
    scored.sort_by(|a, b| b.1.score.total_cmp(&a.1.score).then(b.0.seq.cmp(&a.0.seq)));
    scored.truncate(limit);
}

/// When a statement was said: an event's own time, else when it was written.
pub(crate) fn said_at(statement: &mneme_core::MemoryRecord) -> jiff::Timestamp {
    match &statement.payload {
        Some(mneme_core::Payload::Event(e)) => e.event_time.unwrap_or(statement.created_at),
        _ => statement.created_at,
    }
}

/// Whether `statement` is one `fact` was read from (among its `evidence`).
pub fn is_evidence(fact: &mneme_core::MemoryRecord, statement: &mneme_core::MemoryRecord) -> bool {
    matches!(&fact.payload, Some(mneme_core::Payload::Semantic(f)) if f.evidence.contains(&statement.id.to_string()))
}

/// How a newer statement puts `fact` in doubt, for a hit that stands without it.
fn in_doubt(fact: &mneme_core::MemoryRecord, statement: &mneme_core::MemoryRecord) -> Option<crate::types::Outdated> {
    let mneme_core::Payload::Semantic(f) = fact.payload.as_ref()? else { return None };
    Some(crate::types::Outdated {
        slot: fact.tags.iter().find_map(|t| t.strip_prefix("slot:"))?.to_string(),
        old: f.object.clone(),
        new: None,
        since: said_at(statement),
        fact: fact.id.clone(),
        statement: Some(statement.id.clone()),
        by: crate::types::RestsBy::Topic,
    })
}

/// The newest user statement said after the fact `fact` (its `valid_from`, else when it
/// was written) whose own text names the fact's value as whole words, ignoring case (not
/// a question, not the assistant's words, not one of the fact's `evidence`). `None` for a
/// record that is not a fact.
fn newer_statement(
    tx: &ReadTx<'_>,
    fact: &mneme_core::MemoryRecord,
    filter: &RecordFilter,
) -> ServiceResult<Option<mneme_core::MemoryRecord>> {
    let Some(mneme_core::Payload::Semantic(f)) = &fact.payload else { return Ok(None) };
    let (since, value) = (f.valid_from.unwrap_or(fact.created_at), f.object.to_lowercase());
    // Every word of the value (a statement must name it whole), and only what was written
    // since the fact: a value with a frequent word ("cache ti") matched every message that
    // has the word and ranked them all (40 ms of a session start at 84k records).
    let Some(expr) = mneme_core::query::fts5_all(&mneme_core::query::query_tokens(&value)) else { return Ok(None) };
    let written = filter.since.map_or(since, |s| s.max(since));
    let events = RecordFilter { types: vec![MemoryType::Episodic], since: Some(written), ..filter.clone() };
    let seqs: Vec<i64> = tx.lexical_candidates(&expr, &events, 50, (0.0, 0.0))?.iter().map(|c| c.seq).collect();
    Ok(tx
        .get_many(&seqs)?
        .into_iter()
        .filter(|r| {
            let said = match &r.payload {
                Some(mneme_core::Payload::Event(e)) => e.event_time.unwrap_or(r.created_at),
                _ => return false,
            };
            let text = r.payload.as_ref().map(|p| p.own_text()).unwrap_or_default();
            said > since
                && !is_evidence(fact, r)
                && !r.tags.iter().any(|t| t == "role:assistant" || t == mneme_core::QUESTION_TAG)
                && mneme_core::query::contains_word(&text.to_lowercase(), &value)
                // "If we ever leave Austin …" supposes: it puts nothing in doubt.
                && !mneme_truth::asserts_nothing(&text)
        })
        .max_by_key(|r| r.created_at))
}
