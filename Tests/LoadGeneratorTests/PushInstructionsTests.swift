import Foundation
import Testing

@testable import LoadGenerator

/// What `push-instructions` decides without starting a server: the files it writes, what it reads back from
/// callgrind's profiles and the load's JSON, and the arithmetic of the figures it prints.
@Suite("push-instructions: files, readings and figures")
struct PushInstructionsTests {
    private func object(_ text: String) throws -> [String: Any] {
        try #require(JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
    }

    @Test("the relay's configuration: memory limits and APNs directly unless a Redis or a proxy is named")
    func relayConfiguration() throws {
        let plain = try object(
            PushInstructionsReadings.relayConfiguration(
                simulatorPort: 4433, caFile: "/w/apns/ca.pem", redisPort: nil, proxyPort: nil))
        #expect(plain["listen"] as? String == "127.0.0.1:0")
        #expect(plain["limits_store"] == nil)
        let ipLimit = try #require(plain["ip_limit"] as? [String: Int])
        #expect(ipLimit == ["requests": 1_000_000, "period_s": 10, "block_s": 10])
        #expect(plain["push_limit"] as? [String: Int] == ["requests": 1_000_000, "period_s": 60])
        let apns = try #require(plain["apns"] as? [String: String])
        #expect(
            apns == [
                "topic": "app.openduo.pocket", "sandbox_origin": "https://127.0.0.1:4433",
                "production_origin": "https://127.0.0.1:4433", "ca_file": "/w/apns/ca.pem",
            ])
        let server = try #require(plain["server"] as? [String: Int])
        #expect(
            server == [
                "max_connections": 16384, "max_connections_per_address": 0, "connection_timeout_s": 120,
                "shutdown_grace_s": 1,
            ])

        let both = try object(
            PushInstructionsReadings.relayConfiguration(
                simulatorPort: 4433, caFile: "/w/apns/ca.pem", redisPort: 6390, proxyPort: 8888))
        let store = try #require(both["limits_store"] as? [String: Any])
        #expect(store["kind"] as? String == "redis")
        #expect(store["url"] as? String == "redis://127.0.0.1:6390/0")
        #expect(store["timeout_ms"] as? Int == 1000)
        let proxied = try #require(both["apns"] as? [String: String])
        #expect(proxied["proxy"] == "http://127.0.0.1:8888")
        #expect(proxied["sandbox_origin"] == "https://127.0.0.1:4433")
    }

    @Test("tinyproxy listens and allows loopback only, on the port given")
    func tinyproxyConfiguration() {
        let lines = PushInstructionsReadings.tinyproxyConfiguration(port: 30123, logFile: "/w/tinyproxy.log")
            .split(separator: "\n")
        #expect(
            lines == [
                "Port 30123", "Listen 127.0.0.1", "Allow 127.0.0.1", "MaxClients 100", #"LogFile "/w/tinyproxy.log""#,
                "LogLevel Warning",
            ])
    }

    @Test("the last dump is the highest number, not the last name in order; other profiles are not read")
    func lastDump() {
        let names = [
            "callgrind.out", "callgrind.out.9", "callgrind.out.10", "callgrind.out.2", "nginx-callgrind.out.11",
            "callgrind.out.x", "relay.log",
        ]
        #expect(PushInstructionsReadings.lastDump(names, prefix: "callgrind.out") == "callgrind.out.10")
        #expect(PushInstructionsReadings.lastDump(names, prefix: "nginx-callgrind.out") == "nginx-callgrind.out.11")
        #expect(PushInstructionsReadings.lastDump(["relay.log", "callgrind.out"], prefix: "callgrind.out") == nil)
    }

    @Test("pushes are counted only when every answer was a 200")
    func answers() {
        let ok = #"{"rate":100.0,"seconds":10.0,"measured":1000,"statuses":{"200":1000},"failures":0,"unanswered":0}"#
        #expect(PushInstructionsReadings.allAnswered200(ok) == 1000)
        let mixed = #"{"rate":100.0,"statuses":{"200":990,"503":10},"failures":0}"#
        #expect(PushInstructionsReadings.allAnswered200(mixed) == nil)
        #expect(PushInstructionsReadings.allAnswered200(#"{"statuses":{"429":1000}}"#) == nil)
        #expect(PushInstructionsReadings.allAnswered200(#"{"statuses":{}}"#) == nil)
        #expect(PushInstructionsReadings.allAnswered200(#"{"statuses":{"200":0}}"#) == nil)
        #expect(PushInstructionsReadings.allAnswered200("") == nil)
    }

    private let annotation = """
        --------------------------------------------------------------------------------
        Profile data file 'measured.out' (creator: callgrind-3.19.0)
        --------------------------------------------------------------------------------
        Events recorded:  Ir
        --------------------------------------------------------------------------------
        Ir
        --------------------------------------------------------------------------------
        1,234,567,890 (100.0%)  PROGRAM TOTALS

        --------------------------------------------------------------------------------
        Ir                      file:function
        --------------------------------------------------------------------------------
        200,000,000 (16.20%)  ./string/../sysdeps/x86_64/multiarch/memmove-vec-unaligned-erms.S:__memmove_avx_unaligned_erms [/usr/lib/x86_64-linux-gnu/libc.so.6]
        150,000,000 (12.15%)  ./nptl/pthread_create.c:start_thread [/usr/lib/x86_64-linux-gnu/libc.so.6]
        100,000,000 ( 8.10%)  /work/wt/Sources/Network/EventLoops/EventLoop.swift:$s10EventLoops9EventLoopC3runyyF [/work/wt/.build/release/duo-relay]
         90,000,000 ( 7.29%)  /work/wt/Sources/Network/HTTP2Client/Frames.swift:$s11HTTP2Client6FramesV4readyyF [/work/wt/.build/release/duo-relay]
         80,000,000 ( 6.48%)  ???:sha256_block_data_order_avx2 [/usr/lib/x86_64-linux-gnu/libcrypto.so.3]
         70,000,000 ( 5.67%)  ./misc/../sysdeps/unix/sysv/linux/x86_64/clone.S:clone [/usr/lib/x86_64-linux-gnu/libc.so.6]
        """

    @Test("the program's total and the handshake's inclusive cost are read from callgrind_annotate")
    func totals() {
        #expect(PushInstructionsReadings.programTotal(annotation) == 1_234_567_890)
        #expect(PushInstructionsReadings.handshakes(annotation) == nil)
        let inclusive = """
            Ir                      file:function
            --------------------------------------------------------------------------------
            9,000,000 (90.0%)  ???:SSL_do_handshake_internal [/usr/lib/x86_64-linux-gnu/libssl.so.3]
            5,123,456 (41.5%)  ???:SSL_do_handshake [/usr/lib/x86_64-linux-gnu/libssl.so.3]
            5,000,000 (40.5%)  ???:SSL_do_handshake [/usr/lib/x86_64-linux-gnu/libssl.so.3]
            """
        #expect(PushInstructionsReadings.handshakes(inclusive) == 5_123_456)
        #expect(PushInstructionsReadings.programTotal("no profile") == nil)
    }

    @Test("the top functions leave out the thread start and the event loop, and shorten their paths")
    func topFunctions() {
        let lines = PushInstructionsReadings.topFunctions(annotation)
        #expect(
            lines == [
                "200,000,000 (16.20%)  ./string/../sysdeps/x86_64/multiarch/memmove-vec-unaligned-erms.S:"
                    + "__memmove_avx_unaligned_erms [libc.so.6]",
                " 90,000,000 ( 7.29%)  Network/HTTP2Client/Frames.swift:$s11HTTP2Client6FramesV4readyyF [duo-relay]",
                " 80,000,000 ( 6.48%)  ???:sha256_block_data_order_avx2 [libcrypto.so.3]",
            ])
        #expect(PushInstructionsReadings.topFunctions(annotation, count: 2).count == 2)
        #expect(PushInstructionsReadings.topFunctions("PROGRAM TOTALS only").isEmpty)
        let long = "1 (0.1%)  ???:" + String(repeating: "x", count: 300)
        #expect(PushInstructionsReadings.topFunctions("file:function\n---\n" + long) == [String(long.prefix(160))])
    }

    @Test("callgrind-by-library's table: its total, the required libraries less a handshake, side by side")
    func libraries() {
        let relay =
            "    61.3 k  in all\n    25.0 k  libcrypto.so.3\n    12.5 k  duo-relay\n     4.2 k  libssl.so.3\n"
            + "     3.1 k  libnghttp2.so.14\n"
        let nginx = "    40.0 k  in all\n    18.0 k  libcrypto.so.3\n"
        #expect(PushInstructionsReadings.inAll(nginx) == "40.0")
        #expect(PushInstructionsReadings.inAll("") == nil)
        #expect(PushInstructionsReadings.requiredLibraries(relay, handshakePerPush: 0) == "32.3")
        #expect(PushInstructionsReadings.requiredLibraries(relay, handshakePerPush: 5_100) == "27.2")
        #expect(
            PushInstructionsReadings.sideBySide(relay, nginx) == [
                "  61.3 k  in all  |  40.0 k  in all",
                "  25.0 k  libcrypto.so.3  |  18.0 k  libcrypto.so.3",
                "  12.5 k  duo-relay  |  ",
                "  4.2 k  libssl.so.3  |  ",
                "  3.1 k  libnghttp2.so.14  |  ",
            ])
    }

    @Test("the options: the script's defaults, and a store or proxy it does not know is refused")
    func options() throws {
        let defaults = try PushInstructions.Options(Arguments(["--relay-bin", "/b/duo-relay"]))
        #expect(defaults.relayBinary == "/b/duo-relay")
        #expect(defaults.rate == "100" && defaults.seconds == "10")
        #expect(!defaults.redis && !defaults.tinyproxy && !defaults.nginx && defaults.keep == nil)
        let asked = try PushInstructions.Options(
            Arguments([
                "--relay-bin", "r", "--rate", "50", "--seconds", "4", "--store", "redis", "--proxy", "tinyproxy",
                "--nginx", "1", "--keep", "/k",
            ]))
        #expect(asked.rate == "50" && asked.seconds == "4")
        #expect(asked.redis && asked.tinyproxy && asked.nginx && asked.keep == "/k")
        let empty = try PushInstructions.Options(
            Arguments(["--relay-bin", "r", "--store", "", "--proxy", "", "--nginx", "", "--keep", ""]))
        #expect(!empty.redis && !empty.tinyproxy && !empty.nginx && empty.keep == nil)
        for wrong in [["--store", "postgres"], ["--proxy", "squid"], ["--rate", "0"], ["--seconds", "ten"]] {
            #expect(throws: LoadError.self) { try PushInstructions.Options(Arguments(["--relay-bin", "r"] + wrong)) }
        }
        #expect(throws: LoadError.self) { try PushInstructions.Options(Arguments([])) }
    }
}
