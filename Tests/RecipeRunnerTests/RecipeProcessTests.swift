import Foundation
import Glibc
import Testing

@testable import RecipeRunner

/// The process runner both runs drive their tools with: output and error apart or together, input given, the exit
/// status, a deadline that kills, a daemon left behind not waited for, the bounded wait and the loopback client.
@Suite struct RecipeProcessTests {
    @Test func aProcessGivesItsOutputErrorAndStatus() throws {
        let finished = try RecipeProcess.run(
            "sh", ["-c", "cat; echo to-error >&2; exit 3"], input: Data("in\n".utf8))
        #expect(finished.status == 3 && !finished.succeeded)
        #expect(finished.output == "in\n")
        #expect(finished.error == "to-error\n")
        #expect(finished.lastErrorLine == "to-error")
        #expect(finished.tail(1) == "to-error")
        let quiet = try RecipeProcess.run("true", [])
        #expect(quiet.succeeded && quiet.output.isEmpty)
    }

    @Test func theEnvironmentAndDirectoryAreTheProcesss() throws {
        let finished = try RecipeProcess.run(
            "sh", ["-c", "printf '%s %s' \"$CT_VALUE\" \"$PWD\""], directory: "/tmp", environment: ["CT_VALUE": "given"]
        )
        #expect(finished.output == "given /tmp")
    }

    @Test func aDaemonLeftBehindDoesNotHoldTheRunUp() throws {
        // As conmon after `podman run -d`: a process that outlives the command, with what the command was given.
        let started = Date()
        let finished = try RecipeProcess.run("sh", ["-c", "sleep 30 & echo $!"], input: Data())
        #expect(Date().timeIntervalSince(started) < 10)
        let daemon = try #require(Int32(finished.output.trimmingCharacters(in: .whitespacesAndNewlines)))
        kill(daemon, SIGTERM)
        #expect(finished.succeeded)
    }

    @Test func aDeadlineKillsTheProcess() throws {
        let started = Date()
        let finished = try RecipeProcess.run("sleep", ["30"], timeout: 0.3)
        #expect(finished.status == 128 + SIGKILL)
        #expect(Date().timeIntervalSince(started) < 10)
    }

    @Test func aMissingToolIsACheckThatFails() {
        #expect(throws: RecipeFailure.check("")) { try RecipeProcess.run("no-such-tool-here", []) }
        #expect(RecipeProcess.find("sh") != nil)
        #expect(RecipeProcess.find("/given/path") == "/given/path")
    }

    @Test func theWaitIsBoundedAndEndsWhenTheConditionHolds() {
        var calls = 0
        let started = RecipeClock.now()
        let held = RecipeClock.within(0.3) {
            calls += 1
            return false
        }
        let waited = RecipeClock.now() - started
        #expect(!held && calls >= 2)
        #expect(waited >= 0.3 && waited < 10)
        calls = 0
        #expect(
            RecipeClock.within(30) {
                calls += 1
                return calls == 2
            })
        #expect(calls == 2)
    }

    @Test func aFailedWaitPassesTheConditionsFailureOn() {
        #expect(throws: RecipeFailure.check("")) {
            try RecipeClock.within(30) { () throws(RecipeFailure) -> Bool in throw .check("podman logs") }
        }
    }

    @Test func noAnswerFromAClosedPortIsNil() {
        #expect(RecipeHTTP.get("http://127.0.0.1:1/healthz", seconds: 1) == nil)
        #expect(!RecipeHTTP.answers200("http://127.0.0.1:1/healthz", within: 0.2))
    }

    @Test func onlyLoopbackURLsAreAsked() {
        #expect(RecipeHTTP.loopback("http://127.0.0.1:8787/readyz")! == (8787, "/readyz"))
        #expect(RecipeHTTP.loopback("http://127.0.0.1:8787")! == (8787, "/"))
        #expect(RecipeHTTP.loopback("http://example.com:80/") == nil)
        #expect(RecipeHTTP.loopback("http://127.0.0.1:0/") == nil)
        #expect(RecipeHTTP.get("http://192.0.2.1:80/healthz", seconds: 1) == nil)
    }

    @Test func theProcessTableFindsThisProcesssChildByName() throws {
        let child = try RecipeProcess("/bin/sleep", ["30"], output: .discard, error: .discard)
        // Another child by another name, which the name leaves out (other tests of this process start children of
        // their own, such as duo-relay, at the same time: only these two are known).
        let other = try RecipeProcess("/usr/bin/tail", ["-f", "/dev/null"], output: .discard, error: .discard)
        defer {
            for process in [child, other] {
                kill(process.pid, SIGTERM)
                process.wait()
            }
        }
        let sleeping = ProcessTable.children(of: getpid(), named: "sleep")
        #expect(sleeping.contains(child.pid))
        #expect(!sleeping.contains(other.pid))
        #expect(ProcessTable.children(of: getpid(), named: "tail").contains(other.pid))
        #expect(ProcessTable.isRunning(child.pid))
        #expect(child.isRunning)
    }

    /// A child that leaves a process of its own running (a block ending in `server &`) is seen to end all the same.
    @Test func aShellThatLeavesABackgroundProcessIsSeenToEnd() throws {
        let directory = NSTemporaryDirectory() + "doc-test-child-\(getpid())"
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let status = try RecipeProcess.run(
            "/bin/bash", ["-c", "echo started; sleep 30 & echo $! > pid; exit 3"], directory: directory,
            output: .file(directory + "/out"), error: .output
        ).status
        #expect(status == 3)
        #expect(try String(contentsOfFile: directory + "/out", encoding: .utf8) == "started\n")
        let pid = try #require(Int32(String(contentsOfFile: directory + "/pid", encoding: .utf8).dropLast()))
        #expect(ProcessTable.isRunning(pid))
        kill(pid, SIGTERM)
        let captured = try RecipeProcess.run("/bin/sh", ["-c", "echo out; echo error >&2; exit 2"], error: .output)
        #expect(captured.status == 2)
        #expect(captured.output == "out\nerror\n")
    }

    @Test func aFailurePrintsOneLineAndExitsAsTheScriptDid() {
        let check = RecipeFailure.check("image: user is not 10001:10001")
        #expect(ContainerTestRun.lines(check) == ["container-test: FAIL: image: user is not 10001:10001"])
        #expect(ContainerTestRun.status(check) == 1)
        let detailed = RecipeFailure.check("kubernetes: kube play of Redis", detail: "Error: no such image")
        #expect(
            ContainerTestRun.lines(detailed) == [
                "Error: no such image", "container-test: FAIL: kubernetes: kube play of Redis",
            ])
        let noEngine = RecipeFailure(.noEngine, "podman info: no runtime")
        #expect(
            ContainerTestRun.lines(noEngine) == [
                "container-test: no working container engine on this machine: podman info: no runtime"
            ])
        #expect(ContainerTestRun.status(noEngine) == 77)
        let interrupted = RecipeFailure(.interrupted, "interrupted")
        #expect(ContainerTestRun.lines(interrupted).isEmpty && ContainerTestRun.status(interrupted) == 130)
        #expect(
            RecipeFailure(scenario: "systemd", what: "the journal holds a grant").docTestLine
                == "doc-test: FAIL: systemd: the journal holds a grant")
        #expect(
            RecipeFailure.check("jq is not installed").docTestLine == "doc-test: FAIL: doc-test: jq is not installed")
    }
}
