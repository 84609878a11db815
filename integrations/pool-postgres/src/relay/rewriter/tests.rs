//! The rewriter driven from both sides, as a driver and a server would.

use super::Rewriter;
use crate::pooler::SessionStatement;
use crate::relay::testing::*;

#[test]
fn every_statement_name_reaches_the_server_unnamed() {
    let mut rw = logged_in();
    let out = up(
        &mut rw,
        &[
            parse("sqlx_s_1", "SELECT $1"),
            msg(b'D', &[b"Ssqlx_s_1\0"]),
            sync(),
        ],
    );
    let sent = messages(&out);
    assert_eq!(sent[0], (b'P', b"\0SELECT $1\0\0\0".to_vec()));
    assert_eq!(sent[1], (b'D', b"S\0".to_vec()));
    assert_eq!(sent[2].0, b'S');
    // In a transaction ('T'), the next batch binds without a re-parse.
    let back = down(&mut rw, &[parse_complete(), ready(b'T')]);
    assert_eq!(messages(&back).len(), 2);
    let out = up(&mut rw, &[bind("sqlx_s_1"), sync()]);
    let sent = messages(&out);
    assert_eq!(sent.len(), 2, "{sent:?}");
    assert_eq!(sent[0], (b'B', b"\0\0\0\0\0\0\0\0".to_vec()));
    assert_eq!(rw.injected(), 0);
}

#[test]
fn a_bind_after_an_idle_ready_parses_again_and_hides_its_parse_complete() {
    let mut rw = logged_in();
    up(&mut rw, &[parse("s1", "SELECT 1"), sync()]);
    let back = down(&mut rw, &[parse_complete(), ready(b'I')]);
    assert_eq!(messages(&back).len(), 2);
    let out = up(&mut rw, &[bind("s1"), sync()]);
    let sent = messages(&out);
    assert_eq!(sent[0], (b'P', b"\0SELECT 1\0\0\0".to_vec()));
    assert_eq!(sent[1].0, b'B');
    assert_eq!(rw.injected(), 1);
    // The added Parse's reply is dropped; BindComplete and the rest pass.
    let back = down(&mut rw, &[parse_complete(), bind_complete(), ready(b'I')]);
    assert_eq!(back, [bind_complete(), ready(b'I')].concat());
}

#[test]
fn a_nested_parse_in_between_makes_the_outer_bind_parse_again() {
    let mut rw = logged_in();
    // The outer statement, then one run to learn a type, then the
    // outer bind, all before any reply (pipelined).
    up(&mut rw, &[parse("", "SELECT $1::mytype"), sync()]);
    up(
        &mut rw,
        &[parse("s2", "SELECT typname"), bind("s2"), sync()],
    );
    let out = up(&mut rw, &[bind(""), sync()]);
    let sent = messages(&out);
    assert_eq!(sent[0], (b'P', b"\0SELECT $1::mytype\0\0\0".to_vec()));
    assert_eq!(rw.injected(), 1);
}

#[test]
fn a_simple_query_in_a_transaction_makes_the_next_bind_parse_again() {
    let mut rw = logged_in();
    up(&mut rw, &[parse("s1", "SELECT 1"), sync()]);
    down(&mut rw, &[parse_complete(), ready(b'T')]);
    // The server drops its unnamed statement at a simple query.
    up(&mut rw, &[msg(b'Q', &[b"SELECT 2\0"])]);
    down(&mut rw, &[command_complete("SELECT 1"), ready(b'T')]);
    let out = up(&mut rw, &[bind("s1"), sync()]);
    assert_eq!(tags(&out), b"PBS".to_vec());
}

#[test]
fn a_batch_not_yet_answered_counts_as_idle() {
    let mut rw = logged_in();
    let out = up(
        &mut rw,
        &[parse("s1", "SELECT 1"), sync(), bind("s1"), sync()],
    );
    assert_eq!(tags(&out), b"PSPBS".to_vec());
}

#[test]
fn a_failed_parse_is_forgotten_and_close_is_unnamed() {
    let mut rw = logged_in();
    up(&mut rw, &[parse("s1", "SELEC 1"), sync()]);
    let error = msg(b'E', &[b"SERROR\0\0"]);
    let back = down(&mut rw, &[error.clone(), ready(b'I')]);
    assert_eq!(back, [error, ready(b'I')].concat());
    assert_eq!(rw.statements.len(), 0);

    let out = up(&mut rw, &[parse("s3", "SELECT 3"), msg(b'C', &[b"Ss3\0"])]);
    let sent = messages(&out);
    assert_eq!(sent[1], (b'C', b"S\0".to_vec()));
    assert_eq!(rw.statements.len(), 0);
    // A portal's close is left alone.
    let portal = msg(b'C', &[b"Pp1\0"]);
    assert_eq!(up(&mut rw, std::slice::from_ref(&portal)), portal);
}

#[test]
fn a_statement_the_relay_does_not_hold_is_never_sent_by_its_name() {
    // Never parsed, failed, or closed: the connection fails rather than
    // run whatever the shared server session holds under that name.
    for before in [
        vec![],
        vec![parse("s1", "SELECT 1"), msg(b'C', &[b"Ss1\0"]), sync()],
    ] {
        for message in [bind("s1"), msg(b'D', &[b"Ss1\0"])] {
            let mut rw = logged_in();
            let mut out = Vec::new();
            rw.client_bytes(&before.concat(), &mut out).expect("before");
            out.clear();
            let refused = rw.client_bytes(&[message, sync()].concat(), &mut out);
            assert!(refused.is_err(), "{refused:?}");
            assert!(!names(&out, "s1"), "{out:?}");
        }
    }
}

#[test]
fn statements_past_any_count_are_kept_and_the_first_runs_as_itself() {
    // Many more statements than any statement cache holds, each held by
    // the driver: the first is parsed again by its body, never sent by
    // its name.
    let mut rw = logged_in();
    for i in 0..300 {
        up(
            &mut rw,
            &[
                parse(&format!("s{i}"), &format!("SELECT 'ours {i}'")),
                sync(),
            ],
        );
        down(&mut rw, &[parse_complete(), ready(b'I')]);
    }
    let out = up(&mut rw, &[bind("s0"), execute(), sync()]);
    let sent = messages(&out);
    assert_eq!(sent[0], (b'P', b"\0SELECT 'ours 0'\0\0\0".to_vec()));
    assert!(!names(&out, "s0"), "{sent:?}");
}

#[test]
fn past_its_limit_the_relay_fails_the_connection() {
    let mut rw = logged_in_with(Rewriter::with_limits(3, 1 << 20));
    let mut out = Vec::new();
    for i in 0..3 {
        rw.client_bytes(&parse(&format!("s{i}"), "SELECT 1"), &mut out)
            .expect("within the limit");
    }
    // Replacing a held statement is no new one.
    rw.client_bytes(&parse("s0", "SELECT 2"), &mut out)
        .expect("replaced");
    // Closed ones no longer count.
    rw.client_bytes(&msg(b'C', &[b"Ss0\0"]), &mut out)
        .expect("closed");
    rw.client_bytes(&parse("s3", "SELECT 1"), &mut out)
        .expect("room again");
    assert!(rw.client_bytes(&parse("s4", "SELECT 1"), &mut out).is_err());
    let mut by_bytes = logged_in_with(Rewriter::with_limits(100, 64));
    let long = "x".repeat(80);
    assert!(by_bytes
        .client_bytes(&parse("s0", &long), &mut out)
        .is_err());
}

#[test]
fn a_copy_in_with_its_ignored_sync_keeps_the_batches_in_step() {
    let mut rw = logged_in();
    // tokio-postgres's copy_in: Bind/Execute/Sync, then the data,
    // CopyDone/Sync. The server ignores the first Sync (it is in
    // copy-in mode) and answers the two with one ReadyForQuery.
    up(&mut rw, &[parse("s0", "COPY t FROM STDIN"), sync()]);
    down(&mut rw, &[parse_complete(), ready(b'I')]);
    let out = up(&mut rw, &[bind("s0"), execute(), sync()]);
    assert_eq!(tags(&out), b"PBES".to_vec());
    let copy_in = msg(b'G', &[&[0, 0, 0]]);
    let back = down(
        &mut rw,
        &[parse_complete(), bind_complete(), copy_in.clone()],
    );
    assert_eq!(back, [bind_complete(), copy_in].concat());
    up(
        &mut rw,
        &[
            msg(b'd', &[b"1\n"]),
            msg(b'd', &[b"2\n"]),
            msg(b'c', &[]),
            sync(),
        ],
    );
    down(&mut rw, &[command_complete("COPY 2"), ready(b'I')]);
    assert_eq!(rw.batches_sent, rw.batches_answered);
    // The connection goes on: a new statement and a cached one, each
    // answered and placed.
    up(&mut rw, &[parse("s1", "SELECT 1"), sync()]);
    let back = down(&mut rw, &[parse_complete(), ready(b'I')]);
    assert_eq!(tags(&back), b"1Z".to_vec());
    let out = up(&mut rw, &[bind("s1"), execute(), sync()]);
    assert_eq!(tags(&out), b"PBES".to_vec());
    let back = down(
        &mut rw,
        &[
            parse_complete(),
            bind_complete(),
            command_complete("SELECT 1"),
            ready(b'I'),
        ],
    );
    assert_eq!(tags(&back), b"2CZ".to_vec());
    assert_eq!(rw.batches_sent, rw.batches_answered);
}

#[test]
fn a_failed_copy_in_keeps_the_batches_in_step_too() {
    let mut rw = logged_in();
    up(
        &mut rw,
        &[parse("", "COPY t FROM STDIN"), bind(""), execute(), sync()],
    );
    down(
        &mut rw,
        &[parse_complete(), bind_complete(), msg(b'G', &[&[0, 0, 0]])],
    );
    up(
        &mut rw,
        &[msg(b'd', &[b"x\n"]), msg(b'f', &[b"gave up\0"]), sync()],
    );
    let error = msg(b'E', &[b"SERROR\0\0"]);
    down(&mut rw, &[error, ready(b'I')]);
    assert_eq!(rw.batches_sent, rw.batches_answered);
    up(&mut rw, &[parse("s9", "SELECT 9"), sync()]);
    assert_eq!(
        tags(&down(&mut rw, &[parse_complete(), ready(b'I')])),
        b"1Z".to_vec()
    );
}

#[test]
fn replies_it_cannot_place_fail_the_connection() {
    let mut rw = logged_in();
    let mut out = Vec::new();
    assert!(
        rw.server_bytes(&ready(b'I'), &mut out).is_err(),
        "no batch sent"
    );
    let mut rw = logged_in();
    assert!(
        rw.server_bytes(&parse_complete(), &mut out).is_err(),
        "no Parse sent"
    );
    let mut rw = logged_in();
    up(&mut rw, &[parse("s1", "SELECT 1"), sync()]);
    down(&mut rw, &[parse_complete()]);
    assert!(
        rw.server_bytes(&parse_complete(), &mut out).is_err(),
        "one Parse, two replies"
    );
}

#[test]
fn an_error_mid_pipeline_forgets_the_parses_the_server_skipped() {
    let mut rw = logged_in();
    // Three batches at once; the second fails at its first message.
    up(
        &mut rw,
        &[
            parse("a", "SELECT 1"),
            sync(),
            parse("b", "SELEC 2"),
            parse("c", "SELECT 3"),
            sync(),
            parse("d", "SELECT 4"),
            sync(),
        ],
    );
    let error = msg(b'E', &[b"SERROR\0\0"]);
    let back = down(
        &mut rw,
        &[
            parse_complete(),
            ready(b'I'),
            error,
            ready(b'I'),
            parse_complete(),
            ready(b'I'),
        ],
    );
    assert_eq!(tags(&back), b"1ZEZ1Z".to_vec());
    assert!(rw.statements.get(b"a").is_some() && rw.statements.get(b"d").is_some());
    assert!(rw.statements.get(b"b").is_none() && rw.statements.get(b"c").is_none());
}

#[test]
fn a_name_parsed_again_behind_its_failed_parse_stays_held() {
    let mut rw = logged_in();
    // Pipelined: the second batch parses "s1" again before the first
    // batch's Parse of it has failed.
    up(&mut rw, &[parse("s1", "SELEC 1"), sync()]);
    up(
        &mut rw,
        &[parse("s1", "SELECT 2"), bind("s1"), execute(), sync()],
    );
    let error = msg(b'E', &[b"SERROR\0\0"]);
    let back = down(
        &mut rw,
        &[
            error.clone(),
            ready(b'I'),
            parse_complete(),
            bind_complete(),
            command_complete("SELECT 1"),
            ready(b'I'),
        ],
    );
    assert_eq!(
        back,
        [
            error,
            ready(b'I'),
            parse_complete(),
            bind_complete(),
            command_complete("SELECT 1"),
            ready(b'I'),
        ]
        .concat()
    );
    // The second batch's Parse stands: a third batch binds "s1", parsed
    // again by the body that stands, never by its name.
    let mut out = Vec::new();
    rw.client_bytes(&[bind("s1"), execute(), sync()].concat(), &mut out)
        .expect("s1 is held");
    let sent = messages(&out);
    assert_eq!(sent[0], (b'P', b"\0SELECT 2\0\0\0".to_vec()));
    assert_eq!(tags(&out), b"PBES".to_vec());
    assert!(!names(&out, "s1"), "{sent:?}");
    let back = down(
        &mut rw,
        &[
            parse_complete(),
            bind_complete(),
            command_complete("SELECT 1"),
            ready(b'I'),
        ],
    );
    assert_eq!(tags(&back), b"2CZ".to_vec());
}

#[test]
fn a_name_parsed_again_inside_its_failed_batch_is_forgotten() {
    let mut rw = logged_in();
    // The second Parse of "s1" follows the failing one in the same
    // batch: the server skipped it, so "s1" is held by nobody.
    up(
        &mut rw,
        &[
            parse("s1", "SELEC 1"),
            parse("s1", "SELECT 2"),
            bind("s1"),
            execute(),
            sync(),
        ],
    );
    let error = msg(b'E', &[b"SERROR\0\0"]);
    let back = down(&mut rw, &[error.clone(), ready(b'I')]);
    assert_eq!(back, [error, ready(b'I')].concat());
    assert_eq!(rw.statements.len(), 0);
    let mut out = Vec::new();
    let refused = rw.client_bytes(&[bind("s1"), sync()].concat(), &mut out);
    assert!(refused.is_err(), "{refused:?}");
    assert!(!names(&out, "s1"), "{out:?}");
}

#[test]
fn a_later_parse_that_fails_too_forgets_the_name() {
    let mut rw = logged_in();
    // Both pipelined Parses of "s1" fail: after the second error
    // nothing holds it.
    up(&mut rw, &[parse("s1", "SELEC 1"), sync()]);
    up(&mut rw, &[parse("s1", "SELEC 2"), sync()]);
    let error = msg(b'E', &[b"SERROR\0\0"]);
    down(&mut rw, &[error.clone(), ready(b'I')]);
    assert_eq!(rw.statements.len(), 1, "the second Parse is pending");
    down(&mut rw, &[error, ready(b'I')]);
    assert_eq!(rw.statements.len(), 0);
    let mut out = Vec::new();
    assert!(rw
        .client_bytes(&[bind("s1"), sync()].concat(), &mut out)
        .is_err());
}

#[test]
fn a_refused_simple_query_runs_as_the_empty_query_and_fails_with_0a000() {
    let mut rw = logged_in();
    let out = up(&mut rw, &[query("LISTEN jobs")]);
    assert_eq!(out, query(""));
    // The server's answer to the empty query, in a transaction: its
    // EmptyQueryResponse becomes the refusal, its status stays.
    let back = down(&mut rw, &[msg(b'I', &[]), ready(b'T')]);
    assert_eq!(
        back,
        [refusal(SessionStatement::Listen), ready(b'T')].concat()
    );
    let sent = messages(&back);
    let body = String::from_utf8_lossy(&sent[0].1);
    assert!(body.contains("C0A000\0"), "{body}");
    assert!(
        body.contains("LISTEN cannot work behind a transaction-mode pooler"),
        "{body}"
    );
    // What is not refused passes as it is.
    for sql in [
        "SELECT 1",
        "SET LOCAL x.y = 1",
        "UNLISTEN *",
        "SELECT 'SET'",
    ] {
        assert_eq!(up(&mut rw, &[query(sql)]), query(sql), "{sql}");
        let back = down(&mut rw, &[command_complete("SELECT 1"), ready(b'I')]);
        assert_eq!(tags(&back), b"CZ".to_vec(), "{sql}");
    }
}

#[test]
fn a_refused_parse_drops_its_batch_up_to_sync_and_fails_before_its_ready() {
    let mut rw = logged_in();
    let out = up(
        &mut rw,
        &[
            parse("s1", "SELECT 1"),
            bind("s1"),
            execute(),
            parse("s2", "SELECT pg_advisory_lock(1)"),
            msg(b'D', &[b"Ss2\0"]),
            bind("s2"),
            execute(),
            sync(),
        ],
    );
    // What came before the refused Parse, and the Sync.
    assert_eq!(tags(&out), b"PBES".to_vec());
    assert!(!names(&out, "SELECT pg_advisory_lock(1)"));
    let back = down(
        &mut rw,
        &[
            parse_complete(),
            bind_complete(),
            command_complete("SELECT 1"),
            ready(b'I'),
        ],
    );
    assert_eq!(
        back,
        [
            parse_complete(),
            bind_complete(),
            command_complete("SELECT 1"),
            refusal(SessionStatement::AdvisoryLock),
            ready(b'I'),
        ]
        .concat()
    );
    // The refused statement is not held: as one whose Parse failed.
    assert_eq!(rw.statements.len(), 1);
    let mut out = Vec::new();
    assert!(rw
        .client_bytes(&[bind("s2"), sync()].concat(), &mut out)
        .is_err());
}

#[test]
fn a_server_error_before_a_refused_parse_is_the_batch_s_only_error() {
    let mut rw = logged_in();
    let out = up(
        &mut rw,
        &[parse("s1", "SELEC 1"), parse("s2", "SET x.y = 1"), sync()],
    );
    assert_eq!(tags(&out), b"PS".to_vec());
    let failed = msg(b'E', &[b"SERROR\0C42601\0Msyntax error\0\0"]);
    let back = down(&mut rw, &[failed.clone(), ready(b'I')]);
    assert_eq!(back, [failed, ready(b'I')].concat());
    // The next batch is answered as the server answers it.
    up(&mut rw, &[parse("s3", "SELECT 3"), sync()]);
    let back = down(&mut rw, &[parse_complete(), ready(b'I')]);
    assert_eq!(back, [parse_complete(), ready(b'I')].concat());
}

#[test]
fn refusals_between_pipelined_batches_keep_every_answer_in_place() {
    let input = [
        query("SELECT 1"),
        query("SET search_path TO x"),
        parse("s1", "SELECT $1::int4"),
        bind("s1"),
        execute(),
        sync(),
        parse("s2", "LISTEN c"),
        bind("s2"),
        execute(),
        sync(),
        query("SELECT 2"),
    ]
    .concat();
    let replies = [
        command_complete("SELECT 1"),
        ready(b'I'),
        msg(b'I', &[]),
        ready(b'I'),
        parse_complete(),
        bind_complete(),
        command_complete("SELECT 1"),
        ready(b'I'),
        ready(b'I'),
        command_complete("SELECT 1"),
        ready(b'I'),
    ]
    .concat();
    let want = [
        command_complete("SELECT 1"),
        ready(b'I'),
        refusal(SessionStatement::Set),
        ready(b'I'),
        parse_complete(),
        bind_complete(),
        command_complete("SELECT 1"),
        ready(b'I'),
        refusal(SessionStatement::Listen),
        ready(b'I'),
        command_complete("SELECT 1"),
        ready(b'I'),
    ]
    .concat();
    let sent = [
        query("SELECT 1"),
        query(""),
        msg(b'P', &[b"\0SELECT $1::int4\0", &[0, 0]]),
        bind(""),
        execute(),
        sync(),
        sync(),
        query("SELECT 2"),
    ]
    .concat();
    for cut in 0..input.len().max(replies.len()) {
        let mut rw = logged_in();
        let mut out = Vec::new();
        let at = cut.min(input.len());
        rw.client_bytes(&input[..at], &mut out).expect("first part");
        rw.client_bytes(&input[at..], &mut out)
            .expect("second part");
        assert_eq!(out, sent, "cut at {cut}");
        // In place, as the rewriting stream reads: what is owed goes
        // before the next read's bytes.
        let mut back = Vec::new();
        let at = cut.min(replies.len());
        for part in [&replies[..at], &replies[at..]] {
            let mut buf = part.to_vec();
            let kept = rw.server_in_place(&mut buf).expect("replies");
            back.extend_from_slice(&buf[..kept]);
            back.append(rw.take_owed());
        }
        assert_eq!(back, want, "cut at {cut}");
    }
}

#[test]
fn messages_split_anywhere_come_out_the_same() {
    let input = [
        parse("sqlx_s_7", "SELECT $1::int4"),
        msg(b'D', &[b"Ssqlx_s_7\0"]),
        sync(),
        bind("sqlx_s_7"),
        execute(),
        sync(),
    ]
    .concat();
    let replies = [
        parse_complete(),
        msg(b't', &[&[0, 1, 0, 0, 0, 23]]),
        msg(b'T', &[&[0, 0]]),
        ready(b'I'),
        parse_complete(),
        bind_complete(),
        msg(b'D', &[&[0, 1, 0, 0, 0, 1], b"7"]),
        command_complete("SELECT 1"),
        ready(b'I'),
    ]
    .concat();
    let mut rw = logged_in();
    let mut whole = Vec::new();
    rw.client_bytes(&input, &mut whole).expect("whole");
    let mut whole_back = Vec::new();
    rw.server_bytes(&replies, &mut whole_back).expect("whole");
    for cut in 1..input.len().max(replies.len()) {
        let mut rw = logged_in();
        let mut out = Vec::new();
        let at = cut.min(input.len());
        rw.client_bytes(&input[..at], &mut out).expect("first part");
        rw.client_bytes(&input[at..], &mut out)
            .expect("second part");
        assert_eq!(out, whole, "cut at {cut}");
        let mut back = Vec::new();
        let at = cut.min(replies.len());
        rw.server_bytes(&replies[..at], &mut back)
            .expect("first part");
        rw.server_bytes(&replies[at..], &mut back)
            .expect("second part");
        assert_eq!(back, whole_back, "cut at {cut}");
    }
}

#[test]
fn rows_and_copy_data_stream_through_unbuffered() {
    let mut rw = logged_in();
    up(&mut rw, &[msg(b'Q', &[b"SELECT big\0"])]);
    let row = msg(b'D', &[&[0, 1, 0, 1, 0, 0], &vec![b'x'; 65_536]]);
    let mut out = Vec::new();
    // Half a row goes on to the driver at once.
    rw.server_bytes(&row[..30_000], &mut out).expect("half");
    assert_eq!(out, row[..30_000]);
    rw.server_bytes(&row[30_000..], &mut out).expect("rest");
    assert_eq!(out, row);
    let data = msg(b'd', &[&vec![b'y'; 65_536]]);
    let mut sent = Vec::new();
    rw.client_bytes(&data[..10], &mut sent).expect("part");
    assert_eq!(sent, data[..10]);
}

#[test]
fn a_large_bind_streams_through_unbuffered() {
    // A row of several MiB written by a `Bind` (an insert's parameter)
    // goes on as its bytes come once the statement's name is read: the
    // relay never holds the whole message.
    let mut rw = logged_in();
    up(&mut rw, &[parse("s1", "INSERT INTO t VALUES ($1)"), sync()]);
    down(&mut rw, &[parse_complete(), ready(b'T')]);
    let value = vec![b'x'; 4 << 20];
    let len = i32::try_from(value.len()).expect("fits");
    let big = msg(
        b'B',
        &[
            b"\0s1\0",
            &[0, 0, 0, 1],
            &len.to_be_bytes(),
            &value,
            &[0, 0],
        ],
    );
    let mut out = Vec::new();
    let first = 1 << 20;
    rw.client_bytes(&big[..first], &mut out).expect("first MiB");
    assert!(
        out.len() >= first - 16,
        "{} of {first} bytes went on",
        out.len()
    );
    rw.client_bytes(&big[first..], &mut out).expect("the rest");
    rw.client_bytes(&[execute(), sync()].concat(), &mut out)
        .expect("execute");
    let sent = messages(&out);
    assert_eq!(sent[0].0, b'B');
    assert_eq!(sent[0].1[..2], *b"\0\0");
    assert_eq!(sent[0].1.len(), big.len() - 5 - 2);
    assert_eq!(sent[0].1[2..], big[9..]);
    assert_eq!(tags(&out), b"BES".to_vec());
    assert!(!names(&out, "s1"));
}

#[test]
fn a_broken_length_fails_the_connection() {
    let mut rw = logged_in();
    let mut out = Vec::new();
    assert!(rw
        .client_bytes(&[b'P', 0, 0, 0, 1, 9, 9], &mut out)
        .is_err());
    let mut rw = logged_in();
    assert!(rw
        .server_bytes(&[b'D', 0xff, 0xff, 0xff, 0xff], &mut out)
        .is_err());
    let mut rw = logged_in();
    let bad_bind = msg(b'B', &[b"\0no-nul-after-the-name"]);
    assert!(rw.client_bytes(&bad_bind, &mut out).is_err());
}
