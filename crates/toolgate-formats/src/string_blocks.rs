//! The skip of an escape-dense JSON string 64 bytes at a time, for the scan (`scan.rs`): each
//! block's backslashes, quotes and control characters as bitmaps, the escaped bytes found from
//! the backslash runs (their parity carried from block to block), so a tool result written as
//! escaped JSON costs a few instructions per block instead of a loop turn per escape. It
//! refuses exactly what the scan's byte loop refuses, which is what serde_json refuses of a
//! string it skips: an escape other than `\" \\ \/ \b \f \n \r \t \uXXXX`, a control character,
//! no closing quote. Bytes that are not UTF-8 pass, as they pass serde_json's skip.
//!
//! The same bitmaps find where a long run of plain text stops ([`plain_end`]): prose and the
//! runs between a string's escapes, 64 bytes a test.

/// Bytes per block: one bit of a `u64` each.
const BLOCK: usize = 64;

/// Bit `i` set for every even `i`.
const EVEN_BITS: u64 = 0x5555_5555_5555_5555;

/// A block's bitmaps, bit `i` for its byte `i`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Masks {
    backslash: u64,
    /// Quotes and bytes below 0x20: where a string stops unless the byte is escaped (a quote
    /// ends it, a control character, which a JSON string holds only escaped, refuses it).
    stops: u64,
    /// Quotes, backslashes and `n`: the escaped bytes of nearly every escape of JSON written
    /// in a string (`\"`, `\\`, `\n`); other escaped bytes are looked up one by one.
    usual_escapes: u64,
}

/// How a block's masks are computed: by the CPU's vector instructions or a word at a time.
trait Classify {
    fn masks(block: &[u8; BLOCK]) -> Masks;

    /// Quotes, backslashes and bytes below 0x20: where a run of plain text stops.
    fn plain_stops(block: &[u8; BLOCK]) -> u64;

    /// Whether [`Classify::plain_stops`] has a bit set, for the loop that passes block after
    /// block of plain text: the vector ways test all 64 bytes at once and gather no bitmap.
    #[inline(always)]
    fn any_plain_stop(block: &[u8; BLOCK]) -> bool {
        Self::plain_stops(block) != 0
    }
}

/// Where the plain text going on at `at` stops: the first quote, backslash or control
/// character at or after `at`, or the end of `bytes`.
pub(crate) fn plain_end(bytes: &[u8], at: usize) -> usize {
    #[cfg(target_arch = "x86_64")]
    {
        if x86::has_avx2_and_bmi1() {
            // SAFETY: the CPU has AVX2 and BMI1, just checked.
            return unsafe { x86::plain_end_avx2(bytes, at) };
        }
        plain_end_with::<x86::Sse2>(bytes, at)
    }
    #[cfg(not(target_arch = "x86_64"))]
    plain_end_with::<Words>(bytes, at)
}

/// Quotes, backslashes and bytes below 0x20 among 16 bytes, bit `i` for byte `i`: where the
/// first run of a string stops, found in a few instructions for the short strings (keys,
/// names, ids) that most of a body's strings are.
#[inline(always)]
pub(crate) fn plain_stops_16(chunk: &[u8; 16]) -> u32 {
    #[cfg(target_arch = "x86_64")]
    {
        x86::plain_stops_16(chunk)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let mut block = [b' '; BLOCK];
        block[..16].copy_from_slice(chunk);
        Words::plain_stops(&block) as u32
    }
}

/// [`plain_end`] with the masks of `C`, inlined into each entry as [`string_end_with`] is.
#[inline(always)]
fn plain_end_with<C: Classify>(bytes: &[u8], at: usize) -> usize {
    let rest = bytes.get(at..).unwrap_or_default();
    let (blocks, tail) = rest.as_chunks::<BLOCK>();
    for (index, block) in blocks.iter().enumerate() {
        if C::any_plain_stop(block) {
            return at + BLOCK * index + C::plain_stops(block).trailing_zeros() as usize;
        }
    }
    // The last bytes, padded with spaces, which stop nothing.
    let mut padded = [b' '; BLOCK];
    padded[..tail.len()].copy_from_slice(tail);
    match C::plain_stops(&padded) {
        0 => bytes.len(),
        stops => bytes.len() - tail.len() + stops.trailing_zeros() as usize,
    }
}

/// Where the string whose text goes on at `at` ends: just past its closing quote. `at` must be
/// where no escape is under way (just past the opening quote, or past a whole escape). `None`
/// when the text has a control character, an escape JSON does not have, or no closing quote.
pub(crate) fn string_end(bytes: &[u8], at: usize) -> Option<usize> {
    #[cfg(target_arch = "x86_64")]
    {
        if x86::has_avx2_and_bmi1() {
            // SAFETY: the CPU has AVX2 and BMI1, just checked.
            return unsafe { x86::string_end_avx2(bytes, at) };
        }
        string_end_with::<x86::Sse2>(bytes, at)
    }
    #[cfg(not(target_arch = "x86_64"))]
    string_end_with::<Words>(bytes, at)
}

/// [`string_end`] with the masks of `C`; inlined into each entry, so the vector instructions
/// AVX2's entry may use reach the loop.
#[inline(always)]
fn string_end_with<C: Classify>(bytes: &[u8], mut at: usize) -> Option<usize> {
    let mut escapes_next = false;
    // The last bytes, padded with quotes: the string seems to end in the padding (at its
    // first quote, or at its second when a backslash at the very end escapes the first),
    // which the end's check below refuses. So the loop over whole blocks need not ask
    // whether a block is whole.
    let mut padded = [b'"'; BLOCK];
    loop {
        let rest = bytes.get(at..)?;
        // A whole block is read where it lies, not copied.
        let block = match rest.first_chunk::<BLOCK>() {
            Some(block) => block,
            None => {
                padded[..rest.len()].copy_from_slice(rest);
                &padded
            }
        };
        let masks = C::masks(block);
        let escaped = escaped_bytes(masks.backslash, &mut escapes_next);
        // An escaped control character is left to the escapes' check, which refuses it.
        let stops = masks.stops & !escaped;
        let mut rare = escaped & !masks.usual_escapes;
        // Most blocks of escaped text end nothing and hold only the usual escapes.
        if stops | rare == 0 {
            at += BLOCK;
            continue;
        }
        // Only the escapes before the first stop are the string's.
        if stops != 0 {
            rare &= (stops & stops.wrapping_neg()) - 1;
        }
        while rare != 0 {
            let offset = rare.trailing_zeros() as usize;
            rare &= rare - 1;
            match block[offset] {
                b'/' | b'b' | b'f' | b'r' | b't' => {}
                b'u' => {
                    let start = at + offset + 1;
                    let hex = bytes.get(start..start + 4)?;
                    if !hex.iter().all(u8::is_ascii_hexdigit) {
                        return None;
                    }
                }
                _ => return None,
            }
        }
        if stops != 0 {
            let stop = at + stops.trailing_zeros() as usize;
            // A quote of the text ends the string; one of the padding, or a control
            // character, is refused.
            return (bytes.get(stop) == Some(&b'"')).then_some(stop + 1);
        }
        at += BLOCK;
    }
}

/// The bytes of a block a backslash escapes, from where its backslashes are: a run of them
/// escapes the byte past it when the run is odd (`\\` is one escaped backslash, `\\\"` one more
/// and a quote), and every other backslash of a run is escaped by the one before it.
/// `escapes_next` says, coming in, whether the block's first byte is escaped (by an odd run that
/// ended the block before) and, going out, whether the next block's is.
#[inline(always)]
fn escaped_bytes(backslash: u64, escapes_next: &mut bool) -> u64 {
    let first = u64::from(*escapes_next);
    // An escaped backslash escapes nothing: the runs start after it.
    let backslash = backslash & !first;
    let after_backslash = (backslash << 1) | first;
    // Each run that starts on an odd bit, by its first backslash. Added to the backslashes, it
    // carries through its run, clearing it, to the byte past it; the runs that start on an
    // even bit stay set. Past bit 63 the carry is the next block's first byte.
    let odd_starts = backslash & !EVEN_BITS & !after_backslash;
    let (odd_runs_cleared, overflow) = odd_starts.overflowing_add(backslash);
    *escapes_next = overflow;
    // A byte after a backslash is escaped when an odd number of its run comes before it: on
    // an odd bit when the run started on an even one (its bit before still set in the sum),
    // on an even bit when it started on an odd one (cleared).
    let flipped = odd_runs_cleared << 1;
    (EVEN_BITS ^ flipped) & after_backslash
}

/// The masks a word (8 bytes) at a time, exact for every byte: the portable way, and the
/// reference the vector ones are tested against.
#[cfg_attr(target_arch = "x86_64", allow(dead_code))]
struct Words;

#[cfg_attr(target_arch = "x86_64", allow(dead_code))]
impl Words {
    /// Each word of the block (8 bytes, the first in the lowest bits) with where its bits
    /// go in the block's masks, and a `classes` of it: the high bit of each byte that is a
    /// quote, a backslash, an `n`, a control character.
    fn each_word(block: &[u8; BLOCK], mut word_bits: impl FnMut(usize, [u64; 4])) {
        const ONES: u64 = u64::MAX / 255;
        const LOW_SEVEN: u64 = ONES * 0x7f;
        const HIGH: u64 = ONES * 0x80;
        // The high bit of each byte that is zero; no carry crosses bytes, so each is exact.
        let zero = |word: u64| !(((word & LOW_SEVEN) + LOW_SEVEN) | word) & HIGH;
        for (index, word) in block.chunks_exact(8).enumerate() {
            let mut eight = [0; 8];
            eight.copy_from_slice(word);
            let word = u64::from_le_bytes(eight);
            let quote = zero(word ^ (ONES * u64::from(b'"')));
            let backslash = zero(word ^ (ONES * u64::from(b'\\')));
            let letter_n = zero(word ^ (ONES * u64::from(b'n')));
            // Below 0x20: the high bit clear, and the low seven plus 0x60 still below 0x80.
            let control = !(((word & LOW_SEVEN) + ONES * 0x60) | word) & HIGH;
            word_bits(8 * index, [quote, backslash, letter_n, control]);
        }
    }

    /// Each byte's high bit, gathered into the word's top byte, byte `i` at bit `56 + i`, and
    /// moved to `shift`.
    fn gather(high: u64, shift: usize) -> u64 {
        ((high >> 7).wrapping_mul(0x0102_0408_1020_4080) >> 56) << shift
    }
}

impl Classify for Words {
    #[inline(always)]
    fn masks(block: &[u8; BLOCK]) -> Masks {
        let mut masks = Masks::default();
        Self::each_word(block, |shift, [quote, backslash, letter_n, control]| {
            masks.backslash |= Self::gather(backslash, shift);
            masks.stops |= Self::gather(quote | control, shift);
            masks.usual_escapes |= Self::gather(quote | backslash | letter_n, shift);
        });
        masks
    }

    #[inline(always)]
    fn plain_stops(block: &[u8; BLOCK]) -> u64 {
        let mut stops = 0;
        Self::each_word(block, |shift, [quote, backslash, _, control]| {
            stops |= Self::gather(quote | backslash | control, shift);
        });
        stops
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    //! The masks with SSE2 (every x86_64 has it) and AVX2 (when the CPU has it): one way
    //! written once over a vector of bytes, 16 or 32 of them, so the two cannot drift apart.

    use std::arch::x86_64::{
        __m128i, __m256i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_min_epu8, _mm_movemask_epi8,
        _mm_or_si128, _mm_set1_epi8, _mm256_cmpeq_epi8, _mm256_loadu_si256, _mm256_min_epu8,
        _mm256_movemask_epi8, _mm256_or_si256, _mm256_set1_epi8, _mm256_testz_si256,
    };
    use std::marker::PhantomData;

    use super::{BLOCK, Classify, Masks, plain_end_with, string_end_with};

    /// A vector register of bytes, just the operations the masks take. Everything is
    /// `#[inline(always)]`: AVX2's instructions are only allowed where they are inlined into
    /// a function compiled for AVX2, and only then do they compile to one instruction each.
    pub(super) trait ByteVector: Copy {
        /// Bytes in the vector; a divisor of [`BLOCK`].
        const WIDTH: usize;
        /// The `WIDTH` bytes at `at` of `bytes`, which must hold them (it panics otherwise: a
        /// check the callers' constant offsets let the compiler drop).
        fn load(bytes: &[u8], at: usize) -> Self;
        /// `byte` in every lane.
        fn splat(byte: u8) -> Self;
        /// 0xff in each lane where `self` and `other` hold the same byte, 0 elsewhere.
        fn equal(self, other: Self) -> Self;
        /// The lesser byte of each lane, unsigned.
        fn min(self, other: Self) -> Self;
        fn or(self, other: Self) -> Self;
        /// The high bit of each lane, bit `i` for lane `i`, the bits past `WIDTH` clear.
        fn bits(self) -> u64;
        /// Whether a lane is not zero: for lanes that are 0 or 0xff (what [`Self::equal`]
        /// gives), whether [`Self::bits`] has a bit set, without gathering them.
        fn any_set(self) -> bool;
    }

    // SAFETY (every unsafe block of this impl): SSE2 is part of every x86_64.
    impl ByteVector for __m128i {
        const WIDTH: usize = 16;

        #[inline(always)]
        fn load(bytes: &[u8], at: usize) -> Self {
            let bytes = &bytes[at..at + Self::WIDTH];
            // SAFETY: the unaligned load reads the 16 bytes of `bytes`, no more; SSE2.
            unsafe { _mm_loadu_si128(bytes.as_ptr().cast()) }
        }

        #[inline(always)]
        fn splat(byte: u8) -> Self {
            // SAFETY: SSE2.
            unsafe { _mm_set1_epi8(byte as i8) }
        }

        #[inline(always)]
        fn equal(self, other: Self) -> Self {
            // SAFETY: SSE2.
            unsafe { _mm_cmpeq_epi8(self, other) }
        }

        #[inline(always)]
        fn min(self, other: Self) -> Self {
            // SAFETY: SSE2.
            unsafe { _mm_min_epu8(self, other) }
        }

        #[inline(always)]
        fn or(self, other: Self) -> Self {
            // SAFETY: SSE2.
            unsafe { _mm_or_si128(self, other) }
        }

        #[inline(always)]
        fn bits(self) -> u64 {
            // SAFETY: SSE2. The movemask is 16 bits in an i32: as u16, then widened.
            u64::from(unsafe { _mm_movemask_epi8(self) } as u16)
        }

        #[inline(always)]
        fn any_set(self) -> bool {
            // SAFETY: SSE2. (SSE2 has no `ptest`; the mask is one instruction more.)
            unsafe { _mm_movemask_epi8(self) != 0 }
        }
    }

    // SAFETY (every unsafe block of this impl): these functions are only reached through
    // `Avx2`, whose only users are the `#[target_feature(enable = "avx2,bmi1")]` functions of this
    // module, which are called only where the CPU has AVX2; being `#[inline(always)]`, they
    // are compiled into those functions, with AVX2.
    impl ByteVector for __m256i {
        const WIDTH: usize = 32;

        #[inline(always)]
        fn load(bytes: &[u8], at: usize) -> Self {
            let bytes = &bytes[at..at + Self::WIDTH];
            // SAFETY: the unaligned load reads the 32 bytes of `bytes`, no more; AVX2, as
            // above.
            unsafe { _mm256_loadu_si256(bytes.as_ptr().cast()) }
        }

        #[inline(always)]
        fn splat(byte: u8) -> Self {
            // SAFETY: AVX2, as above.
            unsafe { _mm256_set1_epi8(byte as i8) }
        }

        #[inline(always)]
        fn equal(self, other: Self) -> Self {
            // SAFETY: AVX2, as above.
            unsafe { _mm256_cmpeq_epi8(self, other) }
        }

        #[inline(always)]
        fn min(self, other: Self) -> Self {
            // SAFETY: AVX2, as above.
            unsafe { _mm256_min_epu8(self, other) }
        }

        #[inline(always)]
        fn or(self, other: Self) -> Self {
            // SAFETY: AVX2, as above.
            unsafe { _mm256_or_si256(self, other) }
        }

        #[inline(always)]
        fn bits(self) -> u64 {
            // SAFETY: AVX2, as above. The movemask is 32 bits in an i32: as u32, then widened.
            u64::from(unsafe { _mm256_movemask_epi8(self) } as u32)
        }

        #[inline(always)]
        fn any_set(self) -> bool {
            // SAFETY: AVX2, as above. One `vptest`, where the mask would take two instructions.
            unsafe { _mm256_testz_si256(self, self) == 0 }
        }
    }

    /// The masks of a block by vectors `V`, `BLOCK / V::WIDTH` of them; a type only, never
    /// made.
    pub(super) struct Vectors<V>(PhantomData<V>);

    pub(super) type Sse2 = Vectors<__m128i>;

    /// Only for the `#[target_feature(enable = "avx2,bmi1")]` functions below: its masks run AVX2's
    /// instructions.
    type Avx2 = Vectors<__m256i>;

    impl<V: ByteVector> Vectors<V> {
        /// The bytes of the block's part `part`, and its quotes, backslashes and control
        /// characters, each 0xff where the byte is one.
        #[inline(always)]
        fn classes(bytes: &[u8], part: usize) -> (V, [V; 3]) {
            let bytes = V::load(bytes, V::WIDTH * part);
            let quote = bytes.equal(V::splat(b'"'));
            let backslash = bytes.equal(V::splat(b'\\'));
            let control = bytes.min(V::splat(0x1f)).equal(bytes);
            (bytes, [quote, backslash, control])
        }

        /// Where the plain text of the part `part` stops: 0xff at each quote, backslash and
        /// control character.
        #[inline(always)]
        fn plain_stops_in(bytes: &[u8], part: usize) -> V {
            let (_, [quote, backslash, control]) = Self::classes(bytes, part);
            quote.or(backslash).or(control)
        }
    }

    impl<V: ByteVector> Classify for Vectors<V> {
        #[inline(always)]
        fn masks(block: &[u8; BLOCK]) -> Masks {
            let mut masks = Masks::default();
            for part in 0..BLOCK / V::WIDTH {
                let (bytes, [quote, backslash, control]) = Self::classes(block, part);
                let letter_n = bytes.equal(V::splat(b'n'));
                let shift = V::WIDTH * part;
                masks.backslash |= backslash.bits() << shift;
                masks.stops |= quote.or(control).bits() << shift;
                masks.usual_escapes |= quote.or(backslash).or(letter_n).bits() << shift;
            }
            masks
        }

        #[inline(always)]
        fn plain_stops(block: &[u8; BLOCK]) -> u64 {
            // Loops, not iterator adapters: those are not `#[inline(always)]`, and AVX2's
            // instructions outside the `_avx2` functions would be neither fast nor allowed.
            let mut stops = 0;
            for part in 0..BLOCK / V::WIDTH {
                stops |= Self::plain_stops_in(block, part).bits() << (V::WIDTH * part);
            }
            stops
        }

        #[inline(always)]
        fn any_plain_stop(block: &[u8; BLOCK]) -> bool {
            // The parts' stops or-ed together and tested once: no bitmap gathered.
            let mut any = Self::plain_stops_in(block, 0);
            for part in 1..BLOCK / V::WIDTH {
                any = any.or(Self::plain_stops_in(block, part));
            }
            any.any_set()
        }
    }

    /// Whether the CPU runs the AVX2 functions below: AVX2 for the masks and BMI1 for the
    /// bitmaps' `andn` (every CPU with AVX2 has BMI1; the check costs nothing, std caches it).
    #[inline(always)]
    pub(super) fn has_avx2_and_bmi1() -> bool {
        std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("bmi1")
    }

    /// [`super::string_end`] with AVX2's masks.
    ///
    /// # Safety
    /// The CPU must have AVX2 and BMI1 ([`has_avx2_and_bmi1`]).
    #[target_feature(enable = "avx2,bmi1")]
    pub(super) unsafe fn string_end_avx2(bytes: &[u8], at: usize) -> Option<usize> {
        string_end_with::<Avx2>(bytes, at)
    }

    /// [`super::plain_end`] with AVX2's masks.
    ///
    /// # Safety
    /// The CPU must have AVX2 and BMI1 ([`has_avx2_and_bmi1`]).
    #[target_feature(enable = "avx2,bmi1")]
    pub(super) unsafe fn plain_end_avx2(bytes: &[u8], at: usize) -> usize {
        plain_end_with::<Avx2>(bytes, at)
    }

    #[cfg(test)]
    pub(super) fn avx2_masks(block: &[u8; BLOCK]) -> Option<(Masks, u64)> {
        #[target_feature(enable = "avx2,bmi1")]
        fn masks(block: &[u8; BLOCK]) -> (Masks, u64) {
            (Avx2::masks(block), Avx2::plain_stops(block))
        }
        // SAFETY: the CPU has AVX2 and BMI1, just checked.
        has_avx2_and_bmi1().then(|| unsafe { masks(block) })
    }

    /// [`super::plain_stops_16`] with SSE2, which every x86_64 has: inlined where it is used,
    /// with no feature check.
    #[inline(always)]
    pub(super) fn plain_stops_16(chunk: &[u8; 16]) -> u32 {
        // 16 bits, from a u64 whose higher bits are clear.
        Sse2::plain_stops_in(chunk, 0).bits() as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use proptest::prelude::*;
    use serde::de::IgnoredAny;

    /// Where serde_json's skip of the string `written` starts with ends (just past its closing
    /// quote), or `None` when serde_json refuses it.
    fn serde_end(written: &[u8]) -> Option<usize> {
        let mut values = serde_json::Deserializer::from_slice(written).into_iter::<IgnoredAny>();
        values.next()?.ok()?;
        Some(values.byte_offset())
    }

    /// Every way this module skips the string `written` starts with, which must agree.
    fn ends(written: &[u8]) -> Vec<Option<usize>> {
        let mut ends = vec![string_end(written, 1), string_end_with::<Words>(written, 1)];
        #[cfg(target_arch = "x86_64")]
        ends.push(string_end_with::<x86::Sse2>(written, 1));
        ends
    }

    fn assert_as_serde_json(written: &[u8]) -> Result<(), TestCaseError> {
        let expected = serde_end(written);
        for (way, end) in ends(written).into_iter().enumerate() {
            prop_assert_eq!(
                end,
                expected,
                "way {}: {:?}",
                way,
                String::from_utf8_lossy(written)
            );
        }
        Ok(())
    }

    /// A string's text as hostile writers make it: long runs of backslashes (odd and even, so
    /// across a block's edge either parity lands there), quotes escaped or not, every escape,
    /// `\u` with hex cut short or wrong, control characters, bytes that are not UTF-8, plain
    /// stretches that move all of it across the 64-byte edges.
    fn text() -> impl Strategy<Value = Vec<u8>> {
        let piece = prop_oneof![
            4 => "[a-z {}:,é😀]{1,70}".prop_map(String::into_bytes),
            4 => prop::sample::select(vec![
                &br#"\""#[..], br"\\", br"\/", br"\b", br"\f", br"\n", br"\r", br"\t", br#"\\\""#,
                br#"\\""#, br"\u00e9", br"\uD83D\uDE00", br"\uDFFF", br"\uABCDef",
            ])
            .prop_map(<[u8]>::to_vec),
            2 => (1usize..140).prop_map(|run| vec![b'\\'; run]),
            1 => prop::sample::select(vec![
                &b"\""[..], b"\\", br"\x", br"\u12", br"\u12g4", br"\u+04a", br"\U0041", b"\\\x01",
                br"\ ", b"\x00", b"\x1f", b"\x7f", b"\xff", b"\xc3", b"\xed\xa0\x80",
            ])
            .prop_map(<[u8]>::to_vec),
            1 => any::<u8>().prop_map(|byte| vec![byte]),
        ];
        prop::collection::vec(piece, 0..40).prop_map(|pieces| pieces.concat())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4096))]

        /// The string cut where the text ends (often unterminated), and closed and followed
        /// by more JSON, at every alignment to the blocks.
        #[test]
        fn the_blocks_end_a_string_where_serde_json_does(
            text in text(),
            lead in 0usize..64,
            closed in any::<bool>(),
        ) {
            let mut written = b"\"".to_vec();
            written.extend(std::iter::repeat_n(b'a', lead));
            written.extend(&text);
            if closed {
                written.extend(br#"", "more": "\\\"text\""#);
            }
            assert_as_serde_json(&written)?;
        }

        /// Strings serde_json writes of any text, closed: every one is read to its end.
        #[test]
        fn every_string_serde_json_writes_is_skipped_whole(text in any::<String>(), lead in 0usize..64) {
            let written = serde_json::to_string(&format!("{}{text}", "\"".repeat(lead)))
                .expect("a string is written");
            prop_assert_eq!(string_end(written.as_bytes(), 1), Some(written.len()));
            assert_as_serde_json(written.as_bytes())?;
        }

        #[test]
        fn the_masks_agree_whatever_the_bytes(block in prop::array::uniform32(any::<u8>()), other in prop::array::uniform32(any::<u8>())) {
            let mut whole = [0; BLOCK];
            whole[..32].copy_from_slice(&block);
            whole[32..].copy_from_slice(&other);
            let words = (Words::masks(&whole), Words::plain_stops(&whole));
            #[cfg(target_arch = "x86_64")]
            {
                prop_assert_eq!((x86::Sse2::masks(&whole), x86::Sse2::plain_stops(&whole)), words);
                if let Some(avx2) = x86::avx2_masks(&whole) {
                    prop_assert_eq!(avx2, words);
                }
            }
            let (masks, plain_stops) = words;
            for (offset, &byte) in whole.iter().enumerate() {
                let bit = |mask: u64| mask >> offset & 1 == 1;
                prop_assert_eq!(bit(masks.backslash), byte == b'\\');
                prop_assert_eq!(bit(masks.stops), byte == b'"' || byte < 0x20);
                prop_assert_eq!(bit(masks.usual_escapes), matches!(byte, b'"' | b'\\' | b'n'));
                prop_assert_eq!(bit(plain_stops), matches!(byte, b'"' | b'\\') || byte < 0x20);
            }
        }
    }

    /// Where plain text from `at` stops, a byte at a time: the reference for [`plain_end`].
    fn plain_end_one_by_one(bytes: &[u8], at: usize) -> usize {
        bytes[at..]
            .iter()
            .position(|&byte| matches!(byte, b'"' | b'\\') || byte < 0x20)
            .map_or(bytes.len(), |offset| at + offset)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2048))]

        /// Plain stretches of every length around the blocks' edges, a stop (or none) after
        /// them, from every start.
        #[test]
        fn plain_text_ends_at_its_first_stop(
            lead in "[a-z é😀]{0,150}",
            stop in prop::sample::select(vec![&b""[..], b"\"", b"\\", b"\x00", b"\x1f", b"\n"]),
            tail in prop::collection::vec(any::<u8>(), 0..80),
            start in 0usize..150,
        ) {
            let bytes = [lead.as_bytes(), stop, &tail].concat();
            let at = start.min(bytes.len());
            let expected = plain_end_one_by_one(&bytes, at);
            prop_assert_eq!(plain_end(&bytes, at), expected);
            prop_assert_eq!(plain_end_with::<Words>(&bytes, at), expected);
            #[cfg(target_arch = "x86_64")]
            prop_assert_eq!(plain_end_with::<x86::Sse2>(&bytes, at), expected);
            if let Some(chunk) = bytes[at..].first_chunk::<16>() {
                let stops = plain_stops_16(chunk);
                let first = (stops != 0).then(|| at + stops.trailing_zeros() as usize);
                prop_assert_eq!(first, (expected < at + 16).then_some(expected));
            }
        }
    }

    /// The escaped bytes of a run of bytes, a backslash at a time: the reference for the
    /// bitmap arithmetic.
    fn escaped_one_by_one(backslash: &[bool]) -> Vec<bool> {
        let mut escaped = vec![false; backslash.len() + 1];
        let mut at = 0;
        while at < backslash.len() {
            if backslash[at] {
                escaped[at + 1] = true;
                at += 2;
            } else {
                at += 1;
            }
        }
        escaped
    }

    proptest! {
        #[test]
        fn the_escaped_bytes_carry_across_blocks(backslash in prop::collection::vec(any::<bool>(), 0..256)) {
            let expected = escaped_one_by_one(&backslash);
            let mut escapes_next = false;
            for (block, bits) in backslash.chunks(BLOCK).enumerate() {
                let mask = bits.iter().rev().fold(0u64, |mask, &bit| mask << 1 | u64::from(bit));
                let escaped = escaped_bytes(mask, &mut escapes_next);
                for offset in 0..bits.len() {
                    let marked = escaped >> offset & 1 == 1;
                    prop_assert_eq!(marked, expected[BLOCK * block + offset], "{}", offset);
                }
                if bits.len() == BLOCK {
                    prop_assert_eq!(escapes_next, expected[BLOCK * (block + 1)]);
                }
            }
        }
    }

    #[test]
    fn what_the_blocks_refuse_and_accept() {
        let long = "a".repeat(63);
        let cases: &[(String, Option<usize>)] = &[
            (format!("\"{long}\\\"\""), Some(67)),
            (format!("\"{long}\\\\\""), Some(67)),
            (format!("\"{long}\\\\\\\""), None),
            (format!("\"{long}\\u00e9\""), Some(71)),
            (format!("\"{long}\\u00e\""), None),
            (format!("\"{long}\\x\""), None),
            (format!("\"{long}\t\""), None),
            (format!("\"{long}{long}"), None),
            (format!("\"{}\"", "\\\\".repeat(64)), Some(130)),
            (format!("\"{}\"", "\\\\".repeat(64) + "\\"), None),
        ];
        for (written, end) in cases {
            assert_eq!(
                ends(written.as_bytes()),
                vec![*end; ends(b"\"\"").len()],
                "{written}"
            );
            assert_eq!(serde_end(written.as_bytes()), *end, "{written}");
        }
    }
}
