//! The host "device": this CPU and kernel, as replay reports and history
//! rows name it.

/// `"host x86_64: <CPU model> (<n> CPUs), Linux <release>"`.
pub fn host_description() -> String {
    // The first CPU's entry only: the kernel generates /proc/cpuinfo as it
    // is read, and the whole file of a many-core node is hundreds of KiB.
    let cpu = std::fs::File::open("/proc/cpuinfo")
        .ok()
        .and_then(|f| {
            std::io::BufRead::lines(std::io::BufReader::new(f))
                .map_while(Result::ok)
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':').map(|(_, v)| v.trim().to_string()))
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let n = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    format!(
        "host {}: {cpu} ({n} CPUs), Linux {kernel}",
        std::env::consts::ARCH
    )
}
