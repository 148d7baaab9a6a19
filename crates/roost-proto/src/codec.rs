//! The codec every generated client and server uses: prost's, with a smaller first buffer.
//!
//! tonic gives each call an encode and a decode buffer of 8 KiB up front. A connected worker's
//! stream lives as long as the worker, and its messages (lease renewals, acks) are tens to a few
//! hundred bytes, so those two buffers were 16 KiB of the leader's memory per worker
//! (BENCHMARKS.md, "Run at 10,000 workers"), and 2 KiB at 1 KiB each (BENCHMARKS.md, "Relayed
//! workers"). A buffer still grows to the largest message it carries, so big messages (Raft's
//! appends) cost only a few more reallocations.

use tonic::codec::{BufferSettings, Codec};
use tonic_prost::{ProstCodec, ProstDecoder, ProstEncoder};

/// The first size of a call's encode and decode buffers.
pub const FIRST_BUFFER_BYTES: usize = 256;
/// How much an encoder writes before it yields (tonic's default).
const YIELD_THRESHOLD_BYTES: usize = 32 * 1024;

fn settings() -> BufferSettings {
    BufferSettings::new(FIRST_BUFFER_BYTES, YIELD_THRESHOLD_BYTES)
}

/// [`ProstCodec`] with [`FIRST_BUFFER_BYTES`] buffers.
#[derive(Debug, Clone)]
pub struct RoostCodec<T, U>(std::marker::PhantomData<(T, U)>);

impl<T, U> Default for RoostCodec<T, U> {
    fn default() -> Self {
        RoostCodec(std::marker::PhantomData)
    }
}

impl<T, U> Codec for RoostCodec<T, U>
where
    T: prost::Message + Send + 'static,
    U: prost::Message + Default + Send + 'static,
{
    type Encode = T;
    type Decode = U;
    type Encoder = ProstEncoder<T>;
    type Decoder = ProstDecoder<U>;

    fn encoder(&mut self) -> Self::Encoder {
        ProstCodec::<T, U>::raw_encoder(settings())
    }

    fn decoder(&mut self) -> Self::Decoder {
        ProstCodec::<T, U>::raw_decoder(settings())
    }
}
