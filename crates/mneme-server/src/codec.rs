//! The gRPC codec of `mneme.v1`: prost's, except that a request that fails to decode is
//! the client's fault, `INVALID_ARGUMENT`, where tonic-prost answers `INTERNAL` (gRPC's
//! status-code table files parse errors under INTERNAL; for a server whose every INTERNAL
//! is otherwise a bug of its own, a malformed request must not look like one).
//! `build.rs` points the generated services at [`MnemeCodec`].

use tonic::Status;
use tonic::codec::{BufferSettings, Codec, DecodeBuf, Decoder};
use tonic_prost::{ProstCodec, ProstDecoder, ProstEncoder};

/// prost encoding with [`StrictDecoder`].
#[derive(Debug, Clone, Default)]
pub struct MnemeCodec<T, U>(ProstCodec<T, U>);

impl<T, U> Codec for MnemeCodec<T, U>
where
    T: prost::Message + Send + 'static,
    U: prost::Message + Default + Send + 'static,
{
    type Encode = T;
    type Decode = U;
    type Encoder = ProstEncoder<T>;
    type Decoder = StrictDecoder<U>;

    fn encoder(&mut self) -> Self::Encoder {
        self.0.encoder()
    }

    fn decoder(&mut self) -> Self::Decoder {
        StrictDecoder(self.0.decoder())
    }
}

/// prost's decoder with decode failures reported as `INVALID_ARGUMENT`.
#[derive(Debug, Clone, Default)]
pub struct StrictDecoder<U>(ProstDecoder<U>);

impl<U: prost::Message + Default> Decoder for StrictDecoder<U> {
    type Item = U;
    type Error = Status;

    fn decode(&mut self, buf: &mut DecodeBuf<'_>) -> Result<Option<U>, Status> {
        self.0.decode(buf).map_err(|status| Status::invalid_argument(format!("the message could not be decoded: {}", status.message())))
    }

    fn buffer_settings(&self) -> BufferSettings {
        self.0.buffer_settings()
    }
}
