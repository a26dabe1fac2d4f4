import Foundation
import Glibc
import Testing

@testable import RecipeRunner

@Suite struct DocTestReadingsTests {
    /// What `duo-relay dev` prints (DevCommand.instructions), with a path and ports of a run.
    static let devOutput = #"""
        duo-relay dev: relay on http://127.0.0.1:8787, APNs simulator on https://127.0.0.1:40123
        metrics: http://127.0.0.1:9787/metrics
        limits, relaxed for trying by hand: 100 pushes per phone per 60 s, 100 requests per address per 10 s (then blocked 10 s)
        Throwaway keys and CA in /tmp/duo-relay-dev.AbCdEf; nothing is kept: it is removed on exit.
        Try it from another shell:

          GRANT=$(curl -s http://127.0.0.1:8787/v1/grant \
            -d '{"token":"abababababababababababababababababababababababababababababababab","environment":"sandbox"}' | sed -E 's/.*"grant":"([^"]+)".*/\1/')
          SEALED=$(head -c 2934 /dev/urandom | base64 -w0)
          curl -s http://127.0.0.1:8787/v1/push -d "{\"grant\":\"$GRANT\",\"sealed\":\"$SEALED\",\
        \"id\":\"$(openssl rand -hex 32)\",\"thread\":\"$(openssl rand -hex 32)\"}"

        or: duo-relay push --relay http://127.0.0.1:8787 --grant "$GRANT"

        No faults set (--fault PREFIX=OUTCOME makes the simulator misbehave for some tokens).
        Each notification the simulator receives is shown below. Ctrl-C stops.
        """#

    @Test func devsInstructionsAreTheCommandsAPersonPastes() throws {
        let hint = try #require(DocTestReadings.devInstructions(Self.devOutput))
        #expect(hint.push == #"duo-relay push --relay http://127.0.0.1:8787 --grant "$GRANT""#)
        let lines = hint.commands.split(separator: "\n", omittingEmptySubsequences: false)
        #expect(lines.first == "")
        #expect(lines[1] == #"GRANT=$(curl -s http://127.0.0.1:8787/v1/grant \"#)
        #expect(lines[2].hasPrefix("  -d '{\"token\""))
        #expect(lines.last == #"\"id\":\"$(openssl rand -hex 32)\",\"thread\":\"$(openssl rand -hex 32)\"}""#)
        #expect(DocTestReadings.devInstructions("Try it from another shell:\n  ls\n") == nil)
        #expect(DocTestReadings.devInstructions("or: duo-relay push\n") == nil)
    }

    @Test func readsThePromotionTimeTheFailoverRehearsalPrinted() {
        let output =
            "Could not connect to Redis at 127.0.0.1:26379: Connection refused\n"
            + "the replica is the primary 2317 ms after the stop began\n"
        #expect(DocTestReadings.promotionMilliseconds(output) == 2317)
        #expect(DocTestReadings.promotionMilliseconds("the replica is the primary ms after the stop began\n") == nil)
        #expect(DocTestReadings.promotionMilliseconds("") == nil)
    }

    @Test func readyzSaysWhetherTheLimitsAreShared() {
        let shared = #"{"status":"ready","environments":{"production":"up"},"limits":"shared"}"#
        let memory = #"{"status":"ready","environments":{"production":"up"},"limits":"memory"}"#
        #expect(DocTestReadings.limitsShared(Array(shared.utf8)))
        #expect(!DocTestReadings.limitsShared(Array(memory.utf8)))
        #expect(!DocTestReadings.limitsShared(Array("not json".utf8)))
    }

    @Test func countsThePushOutcomesDuoRelayPushPrinted() {
        let text = """
            push: delivered, apns-id 8E5A1F2C-0000-4000-8000-000000000001 (HTTP 200, 35 ms)
            push: delivered, apns-id 8E5A1F2C-0000-4000-8000-000000000002 (HTTP 200, 12 ms)
            push: refused for now (limit: phone); retry after 41 s (HTTP 429, 3 ms)
            push: refused for now (limit: address); retry after 9 s (HTTP 429, 2 ms)
            something else
            """
        let lines = DocTestReadings.PushLines(text)
        #expect(lines.delivered == 2)
        #expect(lines.phoneLimited == 1)
        #expect(lines.all == 4)
        #expect(
            DocTestReadings.PushLines("push: refused for now (limit: phone); retry after 4 s (HTTP 503, 1 ms)")
                .phoneLimited == 0)
    }

    @Test func readsTheProcessesSsNamesOnEachSocket() {
        let ss = """
            0      0      127.0.0.1:54816 127.0.0.1:8443 users:(("tinyproxy",pid=5153,fd=8))
            0      0      127.0.0.1:54818 127.0.0.1:8443 users:(("duo-relay",pid=77,fd=12),("duo-relay",pid=78,fd=12))
            0      0      127.0.0.1:54820 127.0.0.1:8443
            """
        let users = DocTestReadings.socketUsers(ss)
        #expect(users.count == 3)
        #expect(users[0].map(\.name) == ["tinyproxy"])
        #expect(users[0].map(\.pid) == [5153])
        #expect(users[1].map(\.pid) == [77, 78])
        #expect(users[2].isEmpty)
        let listening = "LISTEN 0      511    127.0.0.1:8786 0.0.0.0:* users:((\"duo-relay\",pid=4242,fd=6))"
        #expect(DocTestReadings.socketUsers(listening).first?.first?.pid == 4242)
    }

    @Test func readsAProcessStatLine() throws {
        let stat = try #require(DocTestReadings.processStat("1234 (duo-relay) S 1200 1234 1200 0 -1 4194560 1 0 0 0"))
        #expect(stat.parent == 1200)
        #expect(stat.name == "duo-relay")
        #expect(stat.state == "S")
        // A name may hold spaces and parentheses: it ends at the last ')'.
        #expect(DocTestReadings.processStat("9 (a (b) c) Z 1 9")?.name == "a (b) c")
        #expect(DocTestReadings.processStat("garbage") == nil)
    }

    @Test func theInstallBlockSplitsBeforeEnablingTheService() {
        let block =
            "scripts/install\ninstall -m 0644 a b\nsystemctl daemon-reload && systemctl enable --now duo-relay\nsystemctl status duo-relay\n"
        let split = DocTestReadings.split(block, before: "systemctl daemon-reload")
        #expect(split.head == "scripts/install\ninstall -m 0644 a b\n")
        #expect(
            split.tail == "systemctl daemon-reload && systemctl enable --now duo-relay\nsystemctl status duo-relay\n")
        #expect(DocTestReadings.split("ls\n", before: "systemctl").tail == "")
    }

    @Test func aWholeHTTPAnswerIsReadWithItsBody() {
        let plain = Array("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}".utf8)
        #expect(RecipeHTTP.parse(plain) == RecipeHTTP.Answer(status: 200, body: Array("{}".utf8)))
        let chunked = Array(
            "HTTP/1.1 429 Too Many\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n".utf8)
        #expect(RecipeHTTP.parse(chunked) == RecipeHTTP.Answer(status: 429, body: Array("abcde".utf8)))
        #expect(RecipeHTTP.parse(Array("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nab".utf8)) == nil)
        #expect(RecipeHTTP.isComplete(plain))
        #expect(RecipeHTTP.isComplete(chunked))
        #expect(!RecipeHTTP.isComplete(Array(plain.dropLast())))
        #expect(!RecipeHTTP.isComplete(Array(chunked.dropLast(5))))
        #expect(RecipeHTTP.status(ofHead: Array("HTTP/1.0 403 Filtered\r\n\r\n".utf8)) == 403)
        #expect(RecipeHTTP.status(ofHead: Array("SSH-2.0\r\n\r\n".utf8)) == nil)
    }
}
