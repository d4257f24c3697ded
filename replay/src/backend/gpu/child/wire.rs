//! What the parent and the GPU child say to each other: requests and
//! replies (length-prefixed JSON, each followed by its bytes) over the
//! socket, and the shared window the bulk data goes through.

use std::io::{self, Read, Write};

use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Debug)]
pub(super) enum Request {
    Reserve {
        base: u64,
        size: u64,
        /// The replay may relocate (`Relocation::allow_elsewhere`).
        elsewhere: bool,
    },
    /// `len` bytes in the window go to the arena at `offset`.
    Upload {
        offset: u64,
        len: u64,
    },
    LoadImage {
        kernel: String,
    },
    WriteGlobal {
        name: String,
    },
    /// The device address of the module's global `name`.
    GlobalAddress {
        name: String,
    },
    Launch {
        args: Vec<u64>,
        params: WireParams,
    },
    /// `len` bytes of the arena at `offset` into the window.
    Download {
        offset: u64,
        len: u64,
    },
}

#[derive(Serialize, Deserialize, Debug)]
pub(super) struct WireParams {
    pub num_teams: u64,
    pub num_threads: u64,
    pub shared_memory: u64,
    pub loop_trip_count: u64,
    pub timeout_ns: Option<u64>,
}

#[derive(Serialize, Deserialize, Debug)]
pub(super) enum Reply {
    Ready {
        name: String,
        description: String,
        /// The device's UUID (the child has the driver initialized).
        #[serde(default)]
        uuid: Option<String>,
        /// The sandbox mechanisms the child applied (`sandbox::Mechanisms`).
        sandbox: u64,
    },
    Done,
    /// A global's device address (`None`: the backend cannot say).
    Address {
        address: Option<u64>,
    },
    /// The arena is reserved, its first byte at `base`.
    Reserved {
        base: u64,
    },
    Kernel {
        ns: u64,
        /// The last upload round (bytes, first piece to last copy, time the
        /// backend was busy), for the report and `RRSTORE_GPU_STATS`.
        #[serde(default)]
        upload: Option<WireUpload>,
    },
    /// The backend could not be made; `sandbox`: the mechanisms the child
    /// was confined with when it tried.
    StartFailed {
        error: crate::backend::BackendError,
        sandbox: u64,
    },
}

/// [`crate::backend::gpu::staging::UploadStats`] on the wire.
#[derive(Serialize, Deserialize, Debug, Clone, Copy)]
pub(super) struct WireUpload {
    pub bytes: u64,
    pub elapsed_ns: u64,
    pub busy_ns: u64,
}

/// An anonymous shared mapping, inherited by the forked child.
pub(super) struct Window {
    pub ptr: *mut u8,
    pub len: usize,
}

impl Window {
    pub fn new(len: usize) -> io::Result<Window> {
        // SAFETY: a fresh anonymous mapping; no existing memory is touched.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Window {
            ptr: p as *mut u8,
            len,
        })
    }

    /// The first `len` bytes (at most the window).
    pub fn bytes(&mut self, len: usize) -> &mut [u8] {
        // SAFETY: the mapping holds `self.len` bytes and lives as long as
        // `self`; the other process touches it only between a request and
        // its reply, while this side waits.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, len.min(self.len)) }
    }
}

impl Drop for Window {
    fn drop(&mut self) {
        // SAFETY: our own mapping, unmapped once.
        unsafe { libc::munmap(self.ptr as *mut libc::c_void, self.len) };
    }
}

pub(super) fn send(w: &mut impl Write, msg: &impl Serialize, data: &[u8]) -> io::Result<()> {
    let json = serde_json::to_vec(msg).map_err(io::Error::other)?;
    w.write_all(&(json.len() as u64).to_le_bytes())?;
    w.write_all(&json)?;
    w.write_all(&(data.len() as u64).to_le_bytes())?;
    w.write_all(data)?;
    w.flush()
}

/// One message and its bytes, or `None` at end of stream.
pub(super) fn recv<T: for<'de> Deserialize<'de>>(
    r: &mut impl Read,
) -> io::Result<Option<(T, Vec<u8>)>> {
    let mut len = [0u8; 8];
    match r.read_exact(&mut len) {
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
        r => r?,
    }
    let mut json = vec![0u8; u64::from_le_bytes(len) as usize];
    r.read_exact(&mut json)?;
    r.read_exact(&mut len)?;
    let mut data = vec![0u8; u64::from_le_bytes(len) as usize];
    r.read_exact(&mut data)?;
    let msg = serde_json::from_slice(&json).map_err(io::Error::other)?;
    Ok(Some((msg, data)))
}
