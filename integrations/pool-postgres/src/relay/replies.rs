//! The framing of the server's replies, rewritten where they lie: each
//! message goes on to the driver or is dropped as its bytes come, decided
//! by its tag ([`Rules`], the rewriter's), so nothing is held back and the
//! replies can be rewritten in the driver's own read buffer. Pure: no I/O.

use super::wire::Broken;

/// What becomes of a reply, decided from its tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Verdict {
    /// It goes on to the driver.
    Pass,
    /// It is dropped.
    Drop,
    /// It goes on, and its first body byte (a `ReadyForQuery`'s status)
    /// goes to [`Rules::status`] as it comes.
    Status,
}

/// What the replies' framing asks of the rewriter.
pub(super) trait Rules {
    /// A message with this tag begins.
    ///
    /// # Errors
    ///
    /// [`Broken`]: a reply that cannot be placed.
    fn message(&mut self, tag: u8) -> Result<Verdict, Broken>;

    /// The message's length field is whole.
    ///
    /// # Errors
    ///
    /// [`Broken`]: a length that breaks the framing.
    fn length(&self, tag: u8, len: usize) -> Result<(), Broken>;

    /// The status byte of a message judged [`Verdict::Status`].
    ///
    /// # Errors
    ///
    /// [`Broken`]: a status that cannot be placed.
    fn status(&mut self, status: u8) -> Result<(), Broken>;

    /// Bytes owed to the driver: while it is not empty, every byte that
    /// goes on is appended to it instead of kept in place.
    fn owed(&mut self) -> &mut Vec<u8>;
}

/// Where the framing of the replies stands between reads.
#[derive(Debug, Default)]
pub(super) struct Replies {
    /// Header bytes of the current message seen so far (0 to 5).
    head: u8,
    /// The current message's tag.
    tag: u8,
    /// Its length field, as far as it came.
    len: [u8; 4],
    /// Body bytes of the current message still to come.
    pass: usize,
    /// Whether the current message is dropped rather than passed.
    drop: bool,
    /// A `ReadyForQuery` whose status byte is still to come.
    want_status: bool,
}

impl Replies {
    /// Follows a message's verdict.
    fn judge(&mut self, verdict: Verdict) {
        self.drop = verdict == Verdict::Drop;
        if verdict == Verdict::Status {
            self.want_status = true;
        }
    }

    /// Rewrites the reply bytes `buf` where they lie: what goes on to the
    /// driver is moved to the front of `buf`, and its length returned;
    /// once `rules` owes bytes, what goes on after is owed too.
    ///
    /// # Errors
    ///
    /// [`Broken`], from `rules`: the framing is then lost.
    pub(super) fn rewrite(
        &mut self,
        buf: &mut [u8],
        rules: &mut impl Rules,
    ) -> Result<usize, Broken> {
        let (mut read, mut kept) = (0, 0);
        while read < buf.len() {
            if self.head == 0 && buf.len() - read >= 5 {
                // A whole header: the message at once, as far as it came.
                let tag = buf[read];
                let len = [buf[read + 1], buf[read + 2], buf[read + 3], buf[read + 4]];
                // A negative length breaks the framing, as one below 4 does.
                let len = usize::try_from(i32::from_be_bytes(len)).unwrap_or(0);
                self.judge(rules.message(tag)?);
                rules.length(tag, len)?;
                let here = (1 + len).min(buf.len() - read);
                if self.want_status && here > 5 {
                    self.want_status = false;
                    rules.status(buf[read + 5])?;
                }
                if !self.drop {
                    let owed = rules.owed();
                    if !owed.is_empty() {
                        owed.extend_from_slice(&buf[read..read + here]);
                    } else {
                        if kept != read {
                            buf.copy_within(read..read + here, kept);
                        }
                        kept += here;
                    }
                }
                read += here;
                if here < 1 + len {
                    self.head = 5;
                    self.pass = 1 + len - here;
                }
                continue;
            }
            if self.head < 5 {
                let byte = buf[read];
                read += 1;
                if self.head == 0 {
                    self.tag = byte;
                    self.judge(rules.message(byte)?);
                } else {
                    self.len[usize::from(self.head) - 1] = byte;
                }
                self.head += 1;
                if !self.drop {
                    let owed = rules.owed();
                    if !owed.is_empty() {
                        owed.push(byte);
                    } else {
                        buf[kept] = byte;
                        kept += 1;
                    }
                }
                if self.head == 5 {
                    // A negative length breaks the framing, as one below 4 does.
                    let len = usize::try_from(i32::from_be_bytes(self.len)).unwrap_or(0);
                    rules.length(self.tag, len)?;
                    self.pass = len - 4;
                    if self.pass == 0 {
                        self.head = 0;
                    }
                }
                continue;
            }
            if self.want_status {
                self.want_status = false;
                rules.status(buf[read])?;
            }
            let n = self.pass.min(buf.len() - read);
            if !self.drop {
                let owed = rules.owed();
                if !owed.is_empty() {
                    owed.extend_from_slice(&buf[read..read + n]);
                } else {
                    if kept != read {
                        buf.copy_within(read..read + n, kept);
                    }
                    kept += n;
                }
            }
            read += n;
            self.pass -= n;
            if self.pass == 0 {
                self.head = 0;
            }
        }
        Ok(kept)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::relay::wire::write_message;

    /// Drops `X`, reads the status of `Z`, owes `added` before an `A`.
    #[derive(Default)]
    struct Toy {
        statuses: Vec<u8>,
        owed: Vec<u8>,
    }

    impl Rules for Toy {
        fn message(&mut self, tag: u8) -> Result<Verdict, Broken> {
            Ok(match tag {
                b'X' => Verdict::Drop,
                b'Z' => Verdict::Status,
                b'A' => {
                    self.owed.extend_from_slice(b"added");
                    Verdict::Pass
                }
                b'!' => return Err(Broken("a tag the toy refuses")),
                _ => Verdict::Pass,
            })
        }

        fn length(&self, _tag: u8, len: usize) -> Result<(), Broken> {
            if len < 4 {
                return Err(Broken("a message of a bad length"));
            }
            Ok(())
        }

        fn status(&mut self, status: u8) -> Result<(), Broken> {
            self.statuses.push(status);
            Ok(())
        }

        fn owed(&mut self) -> &mut Vec<u8> {
            &mut self.owed
        }
    }

    fn msg(tag: u8, body: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        write_message(&mut out, tag, &[body]);
        out
    }

    /// `input` through fresh framing in the given pieces: what stayed in
    /// place, and the toy's state after.
    fn through(pieces: &[&[u8]]) -> (Vec<u8>, Toy) {
        let (mut replies, mut toy, mut back) = (Replies::default(), Toy::default(), Vec::new());
        for piece in pieces {
            let mut buf = piece.to_vec();
            let kept = replies.rewrite(&mut buf, &mut toy).expect("framing");
            back.extend_from_slice(&buf[..kept]);
            back.append(&mut toy.owed);
        }
        (back, toy)
    }

    #[test]
    fn dropped_messages_vanish_however_the_bytes_are_cut() {
        let input = [
            msg(b'1', b""),
            msg(b'X', b"hidden"),
            msg(b'D', &[b'r'; 40]),
            msg(b'X', b""),
            msg(b'Z', b"I"),
            msg(b'Z', b"T"),
        ]
        .concat();
        let want = [
            msg(b'1', b""),
            msg(b'D', &[b'r'; 40]),
            msg(b'Z', b"I"),
            msg(b'Z', b"T"),
        ]
        .concat();
        for cut in 0..=input.len() {
            let (back, toy) = through(&[&input[..cut], &input[cut..]]);
            assert_eq!(back, want, "cut at {cut}");
            assert_eq!(toy.statuses, b"IT", "cut at {cut}");
        }
        let bytes: Vec<&[u8]> = input.chunks(1).collect();
        let (back, toy) = through(&bytes);
        assert_eq!(back, want, "byte by byte");
        assert_eq!(toy.statuses, b"IT");
    }

    #[test]
    fn what_follows_an_owed_message_is_owed_in_order() {
        let input = [
            msg(b'C', b"a"),
            msg(b'A', b"b"),
            msg(b'X', b"c"),
            msg(b'D', b"d"),
        ]
        .concat();
        let want = [
            msg(b'C', b"a"),
            b"added".to_vec(),
            msg(b'A', b"b"),
            msg(b'D', b"d"),
        ]
        .concat();
        for cut in 0..=input.len() {
            let (back, _) = through(&[&input[..cut], &input[cut..]]);
            assert_eq!(back, want, "cut at {cut}");
        }
        // In one piece, only what precedes the added bytes stays in place.
        let (mut replies, mut toy) = (Replies::default(), Toy::default());
        let mut buf = input.clone();
        let kept = replies.rewrite(&mut buf, &mut toy).expect("framing");
        assert_eq!(buf[..kept], msg(b'C', b"a"));
        assert_eq!(toy.owed, want[kept..]);
    }

    #[test]
    fn a_bad_length_or_a_refused_tag_is_an_error() {
        for bad in [
            vec![b'D', 0, 0, 0, 3],
            vec![b'D', 0xff, 0xff, 0xff, 0xff],
            msg(b'!', b""),
        ] {
            for cut in 0..bad.len() {
                let (mut replies, mut toy) = (Replies::default(), Toy::default());
                let mut first = bad[..cut].to_vec();
                let mut second = bad[cut..].to_vec();
                let failed = replies
                    .rewrite(&mut first, &mut toy)
                    .and_then(|_| replies.rewrite(&mut second, &mut toy));
                assert!(failed.is_err(), "{bad:?} cut at {cut}");
            }
        }
    }
}
