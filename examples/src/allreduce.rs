//! A minimal data-parallel gradient average over TCP on one machine, so the two-worker example
//! trains like a real distributed job (one model, gradients averaged every step) without an MPI
//! or NCCL dependency.
//!
//! Rank 0 listens on `MASTER_ADDR:MASTER_PORT` (the variables `torchrun` uses); the other ranks
//! connect to it. At each step every rank sends its gradient buffer and a stop flag; rank 0 sums
//! the buffers, divides by the number of ranks and sends the mean back with the OR of the stop
//! flags, so every worker applies the same update and all of them stop at the same step when any
//! one of them is asked to stop.

use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

/// One side of the gradient average.
pub enum AllReduce {
    /// A job of one process: the mean is the buffer itself.
    Single,
    /// Rank 0, connected to every other rank (in rank order).
    Root {
        /// Connections to ranks 1, 2, ….
        peers: Vec<TcpStream>,
    },
    /// Any other rank, connected to rank 0.
    Peer {
        /// The connection to rank 0.
        root: TcpStream,
    },
}

impl AllReduce {
    /// Joins the job: rank 0 accepts `world_size - 1` connections (each peer sends its rank
    /// first), the others connect, retrying until `timeout` while rank 0 starts.
    pub fn connect(
        rank: usize,
        world_size: usize,
        addr: &str,
        timeout: Duration,
    ) -> io::Result<AllReduce> {
        if world_size <= 1 {
            return Ok(AllReduce::Single);
        }
        if rank == 0 {
            let listener = TcpListener::bind(addr)?;
            let mut peers: Vec<Option<TcpStream>> = (1..world_size).map(|_| None).collect();
            for _ in 1..world_size {
                let (mut stream, _) = listener.accept()?;
                stream.set_nodelay(true)?;
                let mut rank_bytes = [0u8; 8];
                stream.read_exact(&mut rank_bytes)?;
                let peer = u64::from_le_bytes(rank_bytes) as usize;
                match peers.get_mut(peer.wrapping_sub(1)) {
                    Some(slot @ None) => *slot = Some(stream),
                    _ => {
                        return Err(io::Error::new(
                            io::ErrorKind::InvalidData,
                            format!("a peer announced rank {peer}, which is not expected"),
                        ));
                    }
                }
            }
            Ok(AllReduce::Root {
                peers: peers.into_iter().flatten().collect(),
            })
        } else {
            let deadline = Instant::now() + timeout;
            let mut stream = loop {
                match TcpStream::connect(addr) {
                    Ok(s) => break s,
                    Err(e) if Instant::now() >= deadline => {
                        return Err(io::Error::new(
                            e.kind(),
                            format!("rank {rank} cannot reach rank 0 at {addr}: {e}"),
                        ));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(50)),
                }
            };
            stream.set_nodelay(true)?;
            stream.write_all(&(rank as u64).to_le_bytes())?;
            Ok(AllReduce::Peer { root: stream })
        }
    }

    /// Replaces `buf` with the mean of every rank's `buf` and returns whether any rank asked to
    /// stop. Every rank must call this the same number of times with buffers of the same length.
    pub fn mean(&mut self, buf: &mut [f32], stop: bool) -> io::Result<bool> {
        match self {
            AllReduce::Single => Ok(stop),
            AllReduce::Root { peers } => {
                let mut any_stop = stop;
                let mut incoming = vec![0f32; buf.len()];
                for peer in peers.iter_mut() {
                    any_stop |= read_message(peer, &mut incoming)?;
                    for (sum, x) in buf.iter_mut().zip(&incoming) {
                        *sum += x;
                    }
                }
                let n = (peers.len() + 1) as f32;
                for x in buf.iter_mut() {
                    *x /= n;
                }
                for peer in peers.iter_mut() {
                    write_message(peer, buf, any_stop)?;
                }
                Ok(any_stop)
            }
            AllReduce::Peer { root } => {
                write_message(root, buf, stop)?;
                read_message(root, buf)
            }
        }
    }
}

fn write_message(stream: &mut TcpStream, buf: &[f32], stop: bool) -> io::Result<()> {
    let mut bytes = Vec::with_capacity(9 + buf.len() * 4);
    bytes.push(u8::from(stop));
    bytes.extend_from_slice(&(buf.len() as u64).to_le_bytes());
    for x in buf {
        bytes.extend_from_slice(&x.to_le_bytes());
    }
    stream.write_all(&bytes)
}

fn read_message(stream: &mut TcpStream, buf: &mut [f32]) -> io::Result<bool> {
    let mut head = [0u8; 9];
    stream.read_exact(&mut head)?;
    let len = u64::from_le_bytes(head[1..9].try_into().expect("8 bytes")) as usize;
    if len != buf.len() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("a rank sent {len} values where {} were expected", buf.len()),
        ));
    }
    let mut bytes = vec![0u8; len * 4];
    stream.read_exact(&mut bytes)?;
    for (x, chunk) in buf.iter_mut().zip(bytes.chunks_exact(4)) {
        *x = f32::from_le_bytes(chunk.try_into().expect("4 bytes"));
    }
    Ok(head[0] != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn three_ranks_agree_on_the_mean_and_on_stopping() {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let addr = format!("127.0.0.1:{port}");
        let handles: Vec<_> = (0..3)
            .map(|rank| {
                let addr = addr.clone();
                std::thread::spawn(move || {
                    let mut ar = AllReduce::connect(rank, 3, &addr, Duration::from_secs(10))
                        .expect("connect");
                    let mut buf = vec![rank as f32, 10.0 * rank as f32];
                    let first = ar.mean(&mut buf, false).unwrap();
                    let mut again = vec![1.0, 1.0];
                    let second = ar.mean(&mut again, rank == 2).unwrap();
                    (buf, first, second)
                })
            })
            .collect();
        for h in handles {
            let (buf, first, second) = h.join().unwrap();
            assert_eq!(buf, vec![1.0, 10.0]);
            assert!(!first);
            assert!(second, "rank 2's stop reaches every rank");
        }
    }
}
