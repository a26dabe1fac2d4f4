import Glibc

// The measured spike of issue 20 (docs/LOOP.md): the same keep-alive HTTP-like server on the Loop module
// (libuv) and on a plain epoll loop, driven by `duo-relay-load open-loop` (scripts/loop-spike).
let arguments = CommandLine.arguments
guard arguments.count >= 3, let port = UInt16(arguments[2]) else {
    let usage = "usage: LoopSpike uv|uv-timers|epoll PORT | LoopSpike tls-tcp|tls-poll PORT RATE SECONDS\n"
    _ = write(STDERR_FILENO, usage, usage.utf8.count)
    exit(64)
}
signal(SIGPIPE, SIG_IGN)
switch arguments[1] {
case "uv": try LibuvServer.run(port: port, timers: false)
case "uv-timers": try LibuvServer.run(port: port, timers: true)
case "epoll": try EpollServer.run(port: port)
case "tls-tcp", "tls-poll":
    let rate = arguments.count > 3 ? Int(arguments[3]) ?? 1000 : 1000
    let seconds = arguments.count > 4 ? Int(arguments[4]) ?? 10 : 10
    try TLSClient.run(shape: TLSClient.Shape(rawValue: arguments[1])!, port: port, rate: rate, seconds: seconds)
default: exit(64)
}
