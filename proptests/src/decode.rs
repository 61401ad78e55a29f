//! Bytes to programs and back: the fuzz targets' input format (every byte
//! string is a program), and its inverse, to seed a corpus from generated
//! programs.
//!
//! Byte 0 sizes the engine (bits 0–1: compute workers 1 + n % 3; bit 2:
//! host workers 1 or 2; bit 3: GIL). Then one statement per tag byte `t`
//! (`t % 16` picks the statement, `t >> 4` is its argument); an op takes
//! two more bytes: `a` (bits 0–3: which vars, bits 4–7: which of them are
//! read) and `b` (bits 0–1: outcome, 2–3: mode, 4: host, 5: run on error,
//! 6–7: priority). An op's tag argument is 15 for "repeat a var", else
//! its bit 0 makes the body wait on the op's first var.

use crate::program::{Mode, OpStmt, Outcome, Program, Stmt, VARS};

/// At most this many statements are decoded.
pub const MAX_STMTS: usize = 64;

/// Decodes any bytes into a program.
pub fn decode(bytes: &[u8]) -> Program {
    let mut it = bytes.iter().copied();
    let head = it.next().unwrap_or(0);
    let mut program = Program {
        compute_workers: 1 + (head & 3) % 3,
        host_workers: 1 + ((head >> 2) & 1),
        gil: head & 8 != 0,
        stmts: Vec::new(),
    };
    while program.stmts.len() < MAX_STMTS {
        let Some(t) = it.next() else { break };
        let arg = t >> 4;
        let var = arg % VARS as u8;
        let stmt = match t % 16 {
            0..=8 => {
                let a = it.next().unwrap_or(0);
                let b = it.next().unwrap_or(0);
                Stmt::Op(decode_op(a, b, arg == 15, arg != 15 && arg & 1 == 1))
            }
            9 | 10 => Stmt::WaitVar(var),
            11 => Stmt::WaitAll,
            12 => Stmt::Delete(var),
            13 => Stmt::Clear(var),
            14 if arg & 1 == 0 => Stmt::Quiesce,
            14 => Stmt::Resume,
            _ => Stmt::Fork {
                drained: arg & 1 == 0,
            },
        };
        program.stmts.push(stmt);
    }
    program
}

fn decode_op(a: u8, b: u8, dup: bool, body_wait: bool) -> OpStmt {
    let (mut reads, mut writes) = (Vec::new(), Vec::new());
    let mut i = 0;
    for v in 0..VARS as u8 {
        if a & (1 << v) != 0 {
            if a & (1 << (4 + i)) != 0 {
                reads.push(v);
            } else {
                writes.push(v);
            }
            i += 1;
        }
    }
    if dup {
        if let Some(&v) = reads.first().or(writes.first()) {
            writes.push(v);
        }
    }
    OpStmt {
        reads,
        writes,
        outcome: match b & 3 {
            2 => Outcome::Fail,
            3 => Outcome::Panic,
            _ => Outcome::Ok,
        },
        mode: match (b >> 2) & 3 {
            2 => Mode::AsyncInline,
            3 => Mode::AsyncThread,
            _ => Mode::Sync,
        },
        host: b & 16 != 0,
        run_on_error: b & 32 != 0,
        priority: (b >> 6) % 3,
        body_wait,
    }
}

/// Encodes a program so that [`decode`] gives it back, for programs whose
/// ops name distinct vars in increasing order (as the generator makes
/// them), perhaps with one var repeated at the end of the writes.
pub fn encode(program: &Program) -> Vec<u8> {
    let mut out = vec![
        (program.compute_workers.saturating_sub(1) % 3)
            | (program.host_workers.saturating_sub(1) & 1) << 2
            | u8::from(program.gil) << 3,
    ];
    for stmt in program.stmts.iter().take(MAX_STMTS) {
        match stmt {
            Stmt::Op(op) => {
                let mut all: Vec<u8> = op.reads.iter().chain(&op.writes).copied().collect();
                all.sort_unstable();
                let dup = all.windows(2).any(|w| w[0] == w[1]);
                // The repeated var is the last write (see `decode_op`).
                let writes = &op.writes[..op.writes.len() - usize::from(dup)];
                let mut vars: Vec<(u8, bool)> = op.reads.iter().map(|&v| (v, true)).collect();
                vars.extend(writes.iter().map(|&v| (v, false)));
                vars.sort_unstable();
                let (mut a, mut i) = (0u8, 0);
                for (v, read) in vars {
                    a |= 1 << (v % VARS as u8);
                    if read {
                        a |= 1 << (4 + i);
                    }
                    i += 1;
                }
                let outcome = match op.outcome {
                    Outcome::Ok => 0,
                    Outcome::Fail => 2,
                    Outcome::Panic => 3,
                };
                let mode = match op.mode {
                    Mode::Sync => 0,
                    Mode::AsyncInline => 2,
                    Mode::AsyncThread => 3,
                };
                let b = outcome
                    | mode << 2
                    | u8::from(op.host) << 4
                    | u8::from(op.run_on_error) << 5
                    | (op.priority % 3) << 6;
                let tag = if dup {
                    0xf0
                } else {
                    u8::from(op.body_wait) << 4
                };
                out.extend([tag, a, b]);
            }
            Stmt::WaitVar(v) => out.push(9 | (v % VARS as u8) << 4),
            Stmt::WaitAll => out.push(11),
            Stmt::Delete(v) => out.push(12 | (v % VARS as u8) << 4),
            Stmt::Clear(v) => out.push(13 | (v % VARS as u8) << 4),
            Stmt::Quiesce => out.push(14),
            Stmt::Resume => out.push(14 | 1 << 4),
            Stmt::Fork { drained } => out.push(15 | u8::from(!drained) << 4),
        }
    }
    out
}
