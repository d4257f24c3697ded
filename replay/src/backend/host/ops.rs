//! The [`Backend`] operations of the host backend: reserving the arena in
//! a runner, filling it (from files in the runner before the image is
//! loaded, or through the staging window), loading the image, writing
//! globals, launching (timed here), and reading the arena back or hashing
//! it from the stopped runner ([`super::judge`]). The runner side of each
//! is in [`super::runner`]; the module documentation of [`super`] says
//! why.

use super::client::malformed;
use super::protocol::Fields;
use super::*;
use crate::backend::{Relocation, Reporting};

impl Backend for HostBackend {
    fn name(&self) -> &'static str {
        "host"
    }

    fn device_description(&self) -> String {
        host_description()
    }

    fn place(&mut self, req: &ArenaRequest<'_>) -> Result<Placement, BackendError> {
        self.expect_image(req.image);
        self.reserve(req.base, req.size)?;
        // A relocation candidate must leave room for the whole slack: the
        // runner that mapped less is let go, so that placement tries the
        // next candidate (in a fresh runner).
        let short = self.slack.as_ref().filter(|s| s.mapped < s.wanted);
        if let (true, Some(s)) = (req.whole_footprint, short) {
            let reason = format!(
                "the zeroed slack after it reaches {} of the {} bytes wanted ({})",
                s.mapped,
                s.wanted,
                s.short.as_deref().unwrap_or("something lies in the range")
            );
            self.kill("no room for the arena's slack");
            self.arena = None;
            self.slack = None;
            return Err(BackendError::Reserve {
                base: req.base,
                size: req.size,
                reason,
            });
        }
        Ok(Placement { base: req.base })
    }

    fn reserve(&mut self, base: u64, size: u64) -> Result<(), BackendError> {
        let reserve_err = |reason: String| BackendError::Reserve { base, size, reason };
        let Some((lo, hi)) = arena::page_range(base, size) else {
            return Err(reserve_err(
                "the range wraps around the address space".into(),
            ));
        };
        let len = hi - lo;
        let slack = slack::wanted(
            base,
            size,
            self.recorded_reservation,
            hi,
            arena::page_size(),
        );
        // A slot of the arena cache, taken before any runner maps the
        // range; the slot of an earlier reservation is released only once
        // its runner is gone (a SIGKILLed runner writes nothing more).
        if let Some(old) = self.live.take() {
            old.end();
        }
        self.held = None;
        self.arena_memory = None;
        self.slack = None;
        self.held = self.config.arena_cache.acquire(len).ok().flatten();
        // 1. The spare, unless it preloaded a runtime the image does not
        // need or something it loaded sits in the range (then it is killed
        // and a runner that maps the arena first takes over).
        if let Some((spare, env)) = take_spare(&self.config) {
            match self.reserve_in(spare.live, lo, len, slack, &env) {
                Ok(Ok(preloaded)) => {
                    self.preloaded = preloaded;
                    return self.mapped(base, size);
                }
                Ok(Err((ErrKind::Occupied | ErrKind::Incompatible, _))) => {
                    // Not waited for: it may be in the middle of its load.
                    if let Some(spare) = self.live.take() {
                        spare.end();
                    }
                }
                Ok(Err((_, why))) => {
                    self.kill("arena reservation failed");
                    return Err(reserve_err(why));
                }
                // The spare is gone (killed with the thread that started
                // it, say): start a fresh runner.
                Err(_) => {}
            }
        }
        // 2. Fresh runners, each in a fresh address-space layout.
        self.preloaded = Vec::new();
        let mut last = String::new();
        for _ in 0..RESERVE_ATTEMPTS {
            let live = self.spawn()?;
            match self.reserve_in(live, lo, len, slack, &[])? {
                Ok(_) => return self.mapped(base, size),
                Err((ErrKind::Occupied, why)) => {
                    last = why;
                    self.kill("arena range occupied");
                }
                Err((_, why)) => {
                    self.kill("arena reservation failed");
                    return Err(reserve_err(why));
                }
            }
        }
        Err(reserve_err(format!(
            "{last} (in {RESERVE_ATTEMPTS} fresh runner processes)"
        )))
    }

    fn upload(&mut self, offset: u64, data: &[u8]) -> Result<(), BackendError> {
        self.write_arena(offset, data)
    }

    fn begin_fill(&mut self, input: &dyn InputSource) -> Result<(), BackendError> {
        // The runner reads the input's files itself where that is faster
        // (see [`fills_from_files`]), asked before the image load so that
        // it fills while its preload finishes.
        // Never once the image is loaded: files are read only before
        // foreign code runs in the runner (docs/security.md).
        if self.fill_started
            || self.files_failed
            || self.elf.is_some()
            || !self.fills_from_files(input.len())
        {
            return Ok(());
        }
        if let Some(plan) = input.extents() {
            self.start_fill(plan)?;
            self.fill_started = true;
        }
        Ok(())
    }

    fn fill(&mut self, input: &mut dyn InputSource) -> Result<FillOutcome, FillError> {
        // A later repetition: the slack gets fresh zeros, as the arena gets
        // the recorded bytes again.
        if std::mem::take(&mut self.slack_dirty)
            && self.slack.as_ref().is_some_and(|s| s.mapped > 0)
        {
            match self.request(&Msg::op(Op::ClearSlack), None)? {
                Ok(_) => {}
                Err((_, why)) => return Err(driver("clearing the arena's slack", why).into()),
            }
        }
        if std::mem::take(&mut self.fill_started) {
            match self.finish_fill()? {
                Ok(took) => {
                    return Ok(FillOutcome {
                        path: RehydratePath::Files,
                        took: Some(took),
                    })
                }
                // A pack moved by gc, a corrupt chunk: the bytes are handed
                // over instead, which retries and reports precisely, and so
                // are later repetitions'.
                Err(_) => self.files_failed = true,
            }
        }
        copy_in(self, input)
    }

    fn staging_window(&mut self, max_len: usize) -> Result<Option<&mut [u8]>, BackendError> {
        if self.staging.is_none() {
            let size = self.arena.as_ref().map_or(0, |a| a.size);
            let len = STAGING_WINDOW.min(usize::try_from(size).unwrap_or(STAGING_WINDOW));
            self.staging = Some(
                StagingBuf::new(len.max(1))
                    .map_err(|e| driver("allocating the staging window", e))?,
            );
        }
        Ok(self.staging.as_mut().map(|b| {
            let n = b.len().min(max_len);
            &mut b.as_mut_slice()[..n]
        }))
    }

    fn commit_staging(&mut self, offset: u64, len: usize) -> Result<(), BackendError> {
        let Some(buf) = self.staging.take() else {
            return Err(internal(
                "a staging window was committed before one was handed out",
            ));
        };
        let r = match buf.as_slice().get(..len) {
            Some(data) => self.write_arena(offset, data),
            None => Err(internal(format!(
                "{len} bytes committed from the {}-byte staging window",
                buf.len()
            ))),
        };
        self.staging = Some(buf);
        r
    }

    fn load_image(&mut self, image: &[u8], kernel: &str) -> Result<(), BackendError> {
        let info = elf::parse(image).map_err(BackendError::Image)?;
        match info.symbol(kernel) {
            Some(s) if s.kind == elf::SymKind::Func => {}
            _ => return Err(BackendError::MissingKernel(kernel.to_string())),
        }
        let needed = info.needed.clone();
        self.elf = Some(info);
        // Pipelined: the runner dlopens while the engine goes on (rehydrating
        // the arena); the replies are collected by the next request.
        let mut m = Msg::op(Op::LoadImage);
        m.bytes(kernel.as_bytes()).bytes(image);
        self.send(&m)?;
        self.send(&Msg::op(Op::Libraries))?;
        self.pending.push(Pending::Load {
            kernel: kernel.to_string(),
            needed,
        });
        self.pending.push(Pending::Libraries);
        Ok(())
    }

    fn write_global(&mut self, name: &str, data: &[u8]) -> Result<(), BackendError> {
        let sym = self
            .elf()?
            .symbol(name)
            .cloned()
            .ok_or_else(|| BackendError::MissingGlobal { name: name.into() })?;
        if sym.size != data.len() as u64 {
            return Err(BackendError::GlobalSize {
                name: name.into(),
                recorded: data.len() as u64,
                actual: sym.size,
            });
        }
        // Pipelined like the load: the runner writes it after the dlopen,
        // and a failure is reported by the next request (the launch) before
        // the kernel runs.
        let mut m = Msg::op(Op::WriteGlobal);
        m.bytes(name.as_bytes()).bytes(data);
        self.send(&m)?;
        self.pending.push(Pending::Global { name: name.into() });
        Ok(())
    }

    fn global_address(&mut self, name: &str) -> Result<Option<u64>, BackendError> {
        if self.elf()?.symbol(name).is_none() {
            return Err(BackendError::MissingGlobal { name: name.into() });
        }
        // Waits for the load (and the writes before it): the address is
        // needed for the launch's arguments.
        let mut m = Msg::op(Op::GlobalAddress);
        m.bytes(name.as_bytes());
        match self.request(&m, None)? {
            Ok(reply) => Fields::new(&reply)
                .u64()
                .map(Some)
                .map_err(|e| malformed("a global's address", e)),
            Err((ErrKind::MissingGlobal, _)) => {
                Err(BackendError::MissingGlobal { name: name.into() })
            }
            Err((_, why)) => Err(driver(&format!("looking up global `{name}`"), why)),
        }
    }

    fn restore_words(&mut self, words: &[(u64, u64, u64)]) -> Result<u64, BackendError> {
        self.restore_stopped(words)
    }

    fn launch(&mut self, args: &[u64], params: &LaunchParams) -> Result<Duration, BackendError> {
        let mut m = Msg::op(Op::Launch);
        m.u64(args.len() as u64);
        for a in args {
            m.u64(*a);
        }
        if self.frozen {
            return Err(internal("a launch after the runner was stopped"));
        }
        // The load's and the globals' replies first, then the time of the
        // launch alone, measured here: the runner's answer is the image's
        // to forge.
        self.settle()?;
        self.slack_dirty = true;
        let t0 = std::time::Instant::now();
        self.send(&m)?;
        let reply = self.receive(params.timeout)?;
        let took = t0.elapsed();
        match reply {
            Ok(_) => Ok(took),
            Err((_, why)) => Err(driver("launch", why)),
        }
    }

    fn download(&mut self, offset: u64, dst: &mut [u8]) -> Result<(), BackendError> {
        self.read_arena(offset, dst)
    }

    fn arena_hash(&mut self) -> Result<Option<[u8; 32]>, BackendError> {
        if let Some(h) = self.translated_hash.take() {
            return Ok(Some(h));
        }
        self.judge(None).map(|(hash, _)| Some(hash))
    }
}

impl Reporting for HostBackend {
    fn runtime_libraries(&self) -> Vec<String> {
        self.libraries.clone()
    }

    fn sandbox_applied(&self) -> Option<crate::sandbox::Mechanisms> {
        self.sandbox
    }
}

// Relocation (issue 19): the runner scans each chunk it decodes; the
// output is translated back here, from the stopped runner.
impl Relocation for HostBackend {
    fn arena_memory(&self) -> Option<super::super::rehydrate::ArenaMemory> {
        self.arena_memory
    }

    fn slack_footprint(&self, size: u64) -> Option<u64> {
        Some(slack::footprint(size, self.recorded_reservation))
    }

    fn arena_slack(&self) -> Option<super::slack::Slack> {
        self.slack.clone()
    }

    fn scan_fills(&mut self, rebaser: Option<crate::placement::Rebaser>) -> bool {
        self.rebaser = rebaser;
        true
    }

    fn fill_rebased(&self) -> u64 {
        self.fill_rebased
    }

    fn back_translate(
        &mut self,
        r: &crate::placement::Rebaser,
    ) -> Result<Option<u64>, BackendError> {
        let (hash, words) = self.judge(Some(r))?;
        self.translated_hash = Some(hash);
        Ok(Some(words))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn describes_the_host() {
        assert!(host_description().starts_with("host x86_64: "));
    }

    /// A backend driven out of order says it is rrstore's bug (exit code
    /// 70), not a driver failure; nothing is started for that.
    #[test]
    fn calls_before_the_reservation_are_internal_errors() {
        let mut b = HostBackend::new(HostConfig {
            runner: Runner {
                program: "/nonexistent/runner".into(),
                args: vec![],
            },
            env: Vec::new(),
            arena_io: ArenaIo::Auto,
            preload: Preload::default(),
            arena_cache: Default::default(),
        });
        let internal = |e: BackendError| match e {
            BackendError::Internal { backend, what } => {
                assert_eq!(backend, "host");
                what
            }
            other => panic!("{other:?}"),
        };
        assert!(internal(b.upload(0, b"x").unwrap_err()).contains("before it was reserved"));
        let mut dst = [0u8; 4];
        assert!(internal(b.download(0, &mut dst).unwrap_err()).contains("before it was reserved"));
        assert!(internal(b.commit_staging(0, 1).unwrap_err()).contains("staging window"));
        assert!(internal(
            b.launch(
                &[],
                &LaunchParams {
                    num_teams: 1,
                    num_threads: 1,
                    shared_memory: 0,
                    loop_trip_count: 0,
                    timeout: None,
                }
            )
            .unwrap_err()
        )
        .contains("before the arena was reserved"));
    }
}
