//! The parent <-> runner protocol over a Unix stream socket.
//!
//! Every message is a little-endian `u32` length followed by that many bytes.
//! A request starts with an [`Op`] byte; a reply starts with 0 (ok) or 1
//! (error, then an [`ErrKind`] byte and a message). Fields are `u64`s and
//! length-prefixed byte strings. Tiny by design: both ends are the same
//! binary, so there is no versioning.

use std::io::{self, Read, Write};

/// Largest message accepted (an image plus headers); guards a corrupt length.
const MAX_MESSAGE: u32 = 1 << 30;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Op {
    /// lo, len, the image's `DT_NEEDED` (count, names), the arena cache's
    /// slot (a path, empty for none), shared (1: map the sealed memfd of
    /// `--arena-fd`, else 0), slack (bytes of zeroed memory wanted after
    /// the arena, `slack::wanted`), launch settings (count, name and
    /// value pairs: the recording's environment, for a spare started
    /// before it was known; set just before the image loads, see
    /// `spare`): map the arena at `lo` (see `arena`)
    /// and the slack after it (`slack::map`, best effort), unless this
    /// runner preloaded a library the image does not need (see
    /// `preload`). Reply: what it preloaded (count, names), what memory
    /// the arena is (`ArenaMemory::to_u8`, as a u64), the slack's bytes
    /// mapped and why fewer than wanted (empty when not).
    Reserve = 1,
    /// kernel name, image bytes: dlopen the image, dlsym the kernel.
    LoadImage = 2,
    /// name, bytes: write a global.
    WriteGlobal = 3,
    /// argument values: call the kernel. The reply carries nothing: the
    /// parent times the request, and reads the arena itself once it has
    /// stopped the runner (`judge`); a runner that loaded the image is
    /// never asked for a result.
    Launch = 4,
    /// reply: runtime libraries mapped in the runner.
    Libraries = 5,
    /// addr, extents (`fill::encode`), relocation
    /// (`fill::encode_rebaser`): decode the input part from its files into
    /// the arena at `addr`, rebasing its stored pointers when relocated;
    /// reply carries the nanoseconds it took and how many it rebased.
    /// Refused once the image is loaded: the runner reads files only
    /// before foreign code runs in it.
    Fill = 9,
    /// name: the address of a global of the loaded image (`dlsym`), as a
    /// u64, where arguments that held the recording's copy are rebased to.
    GlobalAddress = 12,
    /// Unmap the arena: the runner is about to be killed, and the next
    /// replay's arena should get these pages (`HostBackend::release_arena`).
    Release = 11,
    /// Give the slack fresh zeros (`slack::clear`) before a later
    /// repetition's fill: what the last launch wrote there is dropped.
    ClearSlack = 13,
}

impl Op {
    pub fn from_u8(v: u8) -> Option<Op> {
        Some(match v {
            1 => Op::Reserve,
            2 => Op::LoadImage,
            3 => Op::WriteGlobal,
            4 => Op::Launch,
            5 => Op::Libraries,
            9 => Op::Fill,
            11 => Op::Release,
            12 => Op::GlobalAddress,
            13 => Op::ClearSlack,
            _ => return None,
        })
    }
}

/// Why the runner refused a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum ErrKind {
    Reserve = 1,
    /// The range is occupied (EEXIST): worth retrying in a fresh runner.
    Occupied = 2,
    Dlopen = 3,
    MissingKernel = 4,
    MissingGlobal = 5,
    Other = 6,
    /// This runner preloaded a runtime the image does not use: reserve in
    /// another one.
    Incompatible = 7,
}

impl ErrKind {
    pub fn from_u8(v: u8) -> ErrKind {
        match v {
            1 => ErrKind::Reserve,
            2 => ErrKind::Occupied,
            3 => ErrKind::Dlopen,
            4 => ErrKind::MissingKernel,
            5 => ErrKind::MissingGlobal,
            7 => ErrKind::Incompatible,
            _ => ErrKind::Other,
        }
    }
}

/// Builds one message.
#[derive(Default)]
pub struct Msg(pub Vec<u8>);

impl Msg {
    pub fn op(op: Op) -> Msg {
        Msg(vec![op as u8])
    }
    pub fn ok() -> Msg {
        Msg(vec![0])
    }
    pub fn err(kind: ErrKind, message: &str) -> Msg {
        let mut m = Msg(vec![1, kind as u8]);
        m.bytes(message.as_bytes());
        m
    }
    pub fn u64(&mut self, v: u64) -> &mut Msg {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub fn bytes(&mut self, b: &[u8]) -> &mut Msg {
        self.u64(b.len() as u64);
        self.0.extend_from_slice(b);
        self
    }
    pub fn send(&self, w: &mut impl Write) -> io::Result<()> {
        let len = u32::try_from(self.0.len()).map_err(io::Error::other)?;
        w.write_all(&len.to_le_bytes())?;
        w.write_all(&self.0)?;
        w.flush()
    }
}

/// Reads the fields of a received message in order.
pub struct Fields<'a> {
    rest: &'a [u8],
}

fn short() -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, "truncated runner message")
}

impl<'a> Fields<'a> {
    pub fn new(b: &'a [u8]) -> Fields<'a> {
        Fields { rest: b }
    }
    pub fn u8(&mut self) -> io::Result<u8> {
        let (&v, rest) = self.rest.split_first().ok_or_else(short)?;
        self.rest = rest;
        Ok(v)
    }
    pub fn u64(&mut self) -> io::Result<u64> {
        let (head, rest) = self.rest.split_at_checked(8).ok_or_else(short)?;
        self.rest = rest;
        let mut b = [0u8; 8];
        b.copy_from_slice(head);
        Ok(u64::from_le_bytes(b))
    }
    pub fn bytes(&mut self) -> io::Result<&'a [u8]> {
        let n = usize::try_from(self.u64()?).map_err(|_| short())?;
        let (head, rest) = self.rest.split_at_checked(n).ok_or_else(short)?;
        self.rest = rest;
        Ok(head)
    }
    pub fn string(&mut self) -> io::Result<String> {
        Ok(String::from_utf8_lossy(self.bytes()?).into_owned())
    }
}

/// Receive one message; `Ok(None)` on a clean end of stream.
pub fn recv(r: &mut impl Read) -> io::Result<Option<Vec<u8>>> {
    let mut len = [0u8; 4];
    match r.read_exact(&mut len) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let len = u32::from_le_bytes(len);
    if len > MAX_MESSAGE {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("runner message of {len} bytes is too large"),
        ));
    }
    let mut buf = vec![0u8; len as usize];
    r.read_exact(&mut buf)?;
    Ok(Some(buf))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip_and_truncation() {
        let mut m = Msg::op(Op::WriteGlobal);
        m.bytes(b"g_table").bytes(&[1, 2, 3]).u64(42);
        let mut wire = Vec::new();
        m.send(&mut wire).unwrap();
        let got = recv(&mut &wire[..]).unwrap().unwrap();
        let mut f = Fields::new(&got);
        assert_eq!(Op::from_u8(f.u8().unwrap()), Some(Op::WriteGlobal));
        assert_eq!(f.string().unwrap(), "g_table");
        assert_eq!(f.bytes().unwrap(), &[1, 2, 3]);
        assert_eq!(f.u64().unwrap(), 42);
        assert!(f.u8().is_err());
        assert!(recv(&mut &wire[..wire.len() - 1]).is_err());
        assert!(recv(&mut &[][..]).unwrap().is_none());
    }
}
