//! The server's side of the [`Rewriter`]: each reply placed in the
//! driver's batches, the `ParseComplete`s of the relay's own `Parse`s
//! dropped, a refusal's `ErrorResponse` added, and the statements that the
//! server's errors undid forgotten.

use super::Rewriter;
use crate::relay::replies::{Rules, Verdict};
use crate::relay::statements::Sent;
use crate::relay::wire::{error_response, Broken};

impl Rewriter {
    /// Passes backend messages into `out`, streamed as their bytes come,
    /// but for the `ParseComplete`s of the relay's own `Parse`s, which are
    /// dropped.
    ///
    /// # Errors
    ///
    /// [`Broken`]: a reply the relay cannot place, or broken framing.
    pub(crate) fn server_bytes(&mut self, input: &[u8], out: &mut Vec<u8>) -> Result<(), Broken> {
        let start = out.len();
        out.extend_from_slice(input);
        let kept = self.server_in_place(&mut out[start..])?;
        out.truncate(start + kept);
        out.append(&mut self.owed);
        Ok(())
    }

    /// Rewrites backend bytes where they lie, as [`server_bytes`](Self::server_bytes)
    /// does: what goes on to the driver is moved to the front of `buf`, and
    /// its length returned. Nothing is held back between calls, but for an
    /// `ErrorResponse` added for a refused statement: it and every byte for
    /// the driver after it in `buf` are owed instead (see
    /// [`take_owed`](Self::take_owed)), to go before the next call's. Call
    /// it only with nothing owed.
    ///
    /// # Errors
    ///
    /// [`Broken`]: a reply the relay cannot place, or broken framing.
    pub(crate) fn server_in_place(&mut self, buf: &mut [u8]) -> Result<usize, Broken> {
        // The framing's state is taken out while it asks this rewriter,
        // its rules, about each message.
        let mut replies = std::mem::take(&mut self.server);
        let kept = replies.rewrite(buf, self);
        self.server = replies;
        kept
    }
}

impl Rules for Rewriter {
    /// Follows a backend message from its tag: whether it goes on to the
    /// driver.
    fn message(&mut self, tag: u8) -> Result<Verdict, Broken> {
        if !self.logged_in {
            if tag == b'Z' {
                self.logged_in = true;
            }
            return Ok(Verdict::Pass);
        }
        // The batch being answered, if it holds a refused statement.
        let refusal = self
            .refusals
            .front()
            .filter(|refusal| refusal.batch == self.batches_answered);
        match (tag, refusal) {
            (b'I', Some(refusal)) if refusal.empty_query => return Ok(Verdict::Drop),
            (b'E', Some(_)) => {
                // The server failed the batch before the refused statement:
                // that is the batch's one error.
                self.refusals.pop_front();
            }
            (b'Z', Some(_)) => {
                if let Some(refusal) = self.refusals.pop_front() {
                    error_response(&mut self.owed, refusal.statement);
                }
            }
            _ => {}
        }
        match tag {
            b'1' => match self.ledger.parse_complete() {
                Some(Sent::Client(_)) => Ok(Verdict::Pass),
                Some(Sent::Injected) => Ok(Verdict::Drop),
                None => Err(Broken("a ParseComplete the relay cannot place")),
            },
            b'E' => {
                // The server skips the rest of the batch: its `Parse`s not
                // yet answered never ran.
                for sent in self.ledger.skip_rest() {
                    if let Sent::Client(name) = sent {
                        // A later batch (sent, or being written) may parse
                        // the name again: that `Parse` stands, and the body
                        // kept is already its own (each `Parse` replaces
                        // it). Its own error, if it fails, forgets it.
                        if !self.ledger.parses(&name) {
                            self.statements.remove(&name);
                        }
                    }
                }
                self.loaded = None;
                Ok(Verdict::Pass)
            }
            b'Z' => {
                if !self.ledger.answered() {
                    return Err(Broken("a ReadyForQuery the relay cannot place"));
                }
                Ok(Verdict::Status)
            }
            _ => Ok(Verdict::Pass),
        }
    }

    fn length(&self, tag: u8, len: usize) -> Result<(), Broken> {
        if len < 4 {
            return Err(Broken("a message of a bad length"));
        }
        if tag == b'Z' && self.logged_in && len != 5 {
            return Err(Broken("a ReadyForQuery of a bad length"));
        }
        Ok(())
    }

    fn status(&mut self, status: u8) -> Result<(), Broken> {
        let answered = self.batches_answered;
        self.batches_answered += 1;
        if self.batches_answered > self.batches_sent {
            return Err(Broken("more ReadyForQuery than batches sent"));
        }
        if status == b'I' {
            self.last_idle = Some(answered);
        }
        Ok(())
    }

    fn owed(&mut self) -> &mut Vec<u8> {
        &mut self.owed
    }
}
