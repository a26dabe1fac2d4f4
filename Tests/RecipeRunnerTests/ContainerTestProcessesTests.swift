import Foundation
import Testing

@testable import RecipeRunner

/// The process runner container-test drives its tools with: output and error apart, input given, the exit
/// status, a deadline that kills, bounded polling.
@Suite struct ContainerTestProcessesTests {
    @Test func aProcessGivesItsOutputErrorAndStatus() throws {
        let finished = try ContainerProcesses.run(
            "sh", ["-c", "cat; echo to-error >&2; exit 3"], input: Data("in\n".utf8))
        #expect(finished.status == 3 && !finished.succeeded)
        #expect(finished.output == "in\n")
        #expect(finished.error == "to-error\n")
        #expect(finished.lastErrorLine == "to-error")
        #expect(finished.tail(1) == "to-error")
        let quiet = try ContainerProcesses.run("true", [])
        #expect(quiet.succeeded && quiet.output.isEmpty)
    }

    @Test func theEnvironmentAndDirectoryAreTheProcesss() throws {
        let finished = try ContainerProcesses.run(
            "sh", ["-c", "printf '%s %s' \"$CT_VALUE\" \"$PWD\""], environment: ["CT_VALUE": "given"], directory: "/tmp"
        )
        #expect(finished.output == "given /tmp")
    }

    @Test func aDaemonLeftBehindDoesNotHoldTheRunUp() throws {
        // As conmon after `podman run -d`: a process that outlives the command, with what the command was given.
        let started = Date()
        let finished = try ContainerProcesses.run("sh", ["-c", "sleep 30 & echo $!"], input: Data())
        #expect(Date().timeIntervalSince(started) < 10)
        let daemon = try #require(Int32(finished.output.trimmingCharacters(in: .whitespacesAndNewlines)))
        kill(daemon, SIGTERM)
        #expect(finished.succeeded)
    }

    @Test func aDeadlineKillsTheProcess() throws {
        let started = Date()
        let finished = try ContainerProcesses.run("sleep", ["30"], timeout: 0.3)
        #expect(finished.status == 128 + SIGKILL)
        #expect(Date().timeIntervalSince(started) < 10)
    }

    @Test func aMissingToolIsACheckThatFails() {
        #expect(throws: ContainerTestFailure.check("")) { try ContainerProcesses.run("no-such-tool-here", []) }
        #expect(ContainerProcesses.find("sh") != nil)
        #expect(ContainerProcesses.find("/given/path") == "/given/path")
    }

    @Test func pollingIsBounded() throws {
        var calls = 0
        let held = try ContainerProcesses.poll(3, pause: 0.01) {
            calls += 1
            return false
        }
        #expect(!held && calls == 3)
        calls = 0
        #expect(
            try ContainerProcesses.poll(5, pause: 0.01) {
                calls += 1
                return calls == 2
            })
        #expect(calls == 2)
    }

    @Test func noAnswerFromAClosedPortIsNil() {
        #expect(ContainerHTTP.get("http://127.0.0.1:1/healthz", timeout: 1) == nil)
    }

    @Test func aFailurePrintsOneLineAndExitsAsTheScriptDid() {
        let check = ContainerTestFailure.check("image: user is not 10001:10001")
        #expect(ContainerTestRun.lines(check) == ["container-test: FAIL: image: user is not 10001:10001"])
        #expect(ContainerTestRun.status(check) == 1)
        let detailed = ContainerTestFailure.check("kubernetes: kube play of Redis", detail: "Error: no such image")
        #expect(
            ContainerTestRun.lines(detailed) == [
                "Error: no such image", "container-test: FAIL: kubernetes: kube play of Redis",
            ])
        let noEngine = ContainerTestFailure(.noEngine, "podman info: no runtime")
        #expect(
            ContainerTestRun.lines(noEngine) == [
                "container-test: no working container engine on this machine: podman info: no runtime"
            ])
        #expect(ContainerTestRun.status(noEngine) == 77)
        let interrupted = ContainerTestFailure(.interrupted, "interrupted")
        #expect(ContainerTestRun.lines(interrupted).isEmpty && ContainerTestRun.status(interrupted) == 130)
    }
}
