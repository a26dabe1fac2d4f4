import FuzzSupport
import HTTPServer
import MonotonicTime
import TLS

/// The TLS phase of a server connection (HTTPServer `ServerHandshake`) over the first bytes a client sends, driven as
/// the connection's shell drives it: each piece of bytes to the machine, and on its `step` to a real server session of
/// the relay's front context (TLS 1.2 and 1.3, ALPN `http/1.1`: OpenSSL reads the ClientHello, and the relay's ALPN
/// choice reads the client's offer), the session's records flushed after each step. Bytes that do not begin a TLS
/// handshake record are closed as `protocol` without TLS ever seeing them and with nothing written; no input ever
/// completes a handshake (that takes the client's Finished under keys made for this connection); the outcome, and
/// whether the server wrote records, do not depend on how the bytes were split (whole, a byte at a time for inputs up
/// to 1 KiB, in pieces sized by the input's own hash); a client that sent nothing and closed is not a failure; a
/// deadline passed first is a timeout, and no step is ever taken at or after it; during a drain, the deadline ends
/// the handshake uncounted.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzServerHandshake(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    ServerHandshakeTarget.run(fuzzInput(data, size))
    return 0
}

@_cdecl("FuzzServerHandshake_main")
public func fuzzServerHandshakeMain(
    _ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?
) -> CInt {
    runLibFuzzer(argc, argv, fuzzServerHandshake)
}

enum ServerHandshakeTarget {
    static let second: UInt64 = 1_000_000_000
    /// The front's context, made once: a fresh P-256 leaf under a throwaway CA.
    static let context: TLSServerContext = {
        do {
            let pki = try LocalPKI.generate()
            return try TLSServerContext(
                httpFrontChainPEM: pki.certificatePEM, privateKeyPEM: pki.privateKeyPEM, now: 0)
        } catch {
            fatalError("no TLS context: \(error)")
        }
    }()

    /// What one run ended with.
    struct Outcome: Equatable {
        /// The machine's last action: a close (with the failure counted, if any), or a wait (its deadline left out)
        /// when the input ran out.
        var last: ServerHandshake.Action
        /// What the machine said when the client then closed (nil if it had closed already).
        var atEnd: ServerHandshake.Action?
        /// Whether the server wrote any record (its flight, or an alert).
        var wrote = false
    }

    static func run(_ input: [UInt8]) {
        let whole = outcome(input, [input[...]])
        check(whole, input)
        if input.count <= 1024 {
            invariant(outcome(input, input.indices.map { input[$0...$0] }) == whole, "a byte at a time differs")
        }
        let pieces = hashPieces(input)
        let split = outcome(input, pieces)
        invariant(split == whole, "a split in pieces differs")
        timed(input, pieces, split: split)
    }

    /// Piece sizes from the input's own hash (FNV-1a), so that the seeds stay plain hellos.
    static func hashPieces(_ input: [UInt8]) -> [ArraySlice<UInt8>] {
        var hash = fnv(input)
        var pieces: [ArraySlice<UInt8>] = []
        var start = 0
        while start < input.count {
            hash = hash &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            let length = Int(hash >> 57) + 1
            let end = min(input.count, start + length)
            pieces.append(input[start..<end])
            start = end
        }
        return pieces
    }

    static func fnv(_ input: [UInt8]) -> UInt64 {
        var hash: UInt64 = 0xCBF2_9CE4_8422_2325
        for byte in input {
            hash = (hash ^ UInt64(byte)) &* 0x100_0000_01B3
        }
        return hash
    }

    /// Whether `bytes` could still be the start of a TLS handshake record (handshake, major version 3).
    static func beginsARecord(_ bytes: ArraySlice<UInt8>) -> Bool {
        zip(bytes, ServerHandshake.recordStart).allSatisfy { $0 == $1 }
    }

    /// The pieces given to a connection one after the other as the shell gives them, at `arrivals` (all at 0 when
    /// nil), the deadline `timeout` from the accept at 0; the server drains at `drainAt` (before the piece of that
    /// index) with `drainWait`. Then the client closes.
    static func outcome(
        _ input: [UInt8], _ pieces: [ArraySlice<UInt8>], arrivals: [Instant]? = nil, timeout: UInt64 = 30 * second,
        drainAt: Int? = nil, drainWait: UInt64 = 0
    ) -> Outcome {
        var machine = ServerHandshake(acceptedAt: 0, timeout: timeout)
        let records = StreamBIO()
        guard let session = context.session(through: records) else {
            fatalError("no TLS session")
        }
        defer { session.free() }
        var result = Outcome(last: machine.start)
        invariant(result.last == .wait(deadline: Instant(nanoseconds: timeout)), "the first wait is not the deadline")
        var given = 0
        for (index, piece) in pieces.enumerated() {
            guard case .wait(let deadline) = result.last else { break }
            let now = arrivals?[index] ?? 0
            if index == drainAt {
                result.last = machine.drain(now: now, wait: drainWait)
                invariant(result.last == .wait(deadline: min(deadline, now + drainWait)), "a drain lengthened a wait")
            }
            if now >= machine.deadline {
                // The timer fires before the bytes are read.
                result.last = machine.deadlineReached(now: now)
                invariant(
                    result.last == .close(drainAt.map { $0 <= index } == true ? nil : .timeout),
                    "the deadline did not end the handshake as it should")
                break
            }
            given += piece.count
            piece.withUnsafeBytes { bytes in
                records.reading(bytes) {
                    result.last = machine.received(bytes, now: now)
                    while case .step = result.last {
                        invariant(now < machine.deadline, "a step at or after the deadline")
                        invariant(beginsARecord(input[..<given]), "TLS was handed bytes that begin no record")
                        let step: ServerHandshake.Step
                        switch session.acceptStep() {
                        case .done: step = .done
                        case .inProgress: step = .inProgress
                        case .failed(let failure): step = .failed(ServerHandshake.Failure(failure))
                        }
                        records.flush { result.wrote = result.wrote || !$0.isEmpty }
                        result.last = machine.stepped(step, now: now)
                    }
                }
            }
        }
        if case .wait = result.last {
            result.atEnd = machine.peerClosed()
            invariant(machine.phase == .closed, "still handshaking after the client closed")
        }
        invariant(machine.phase != .open && result.last != .open, "a handshake completed from bytes alone")
        // A wait's deadline depends on the clock given, not on the bytes: compared as a wait.
        if case .wait = result.last { result.last = .wait(deadline: 0) }
        return result
    }

    static func check(_ outcome: Outcome, _ input: [UInt8]) {
        if input.isEmpty {
            invariant(outcome.atEnd == .close(nil), "a client that sent nothing was counted")
        } else if !beginsARecord(input[...]) {
            invariant(outcome.last == .close(.protocol), "bytes that begin no TLS record were not closed as protocol")
            invariant(!outcome.wrote, "the server answered bytes that begin no TLS record")
        } else {
            // Frozen time: never a timeout; a client that closes part-way is `other`.
            invariant(outcome.last != .close(.timeout), "a timeout without time passing")
            if outcome.atEnd != nil {
                invariant(outcome.atEnd == .close(.other), "a client closing part-way was not counted as other")
            }
        }
    }

    /// The same pieces arriving a second apart, the deadline (and a drain) placed by the input's hash: pieces
    /// before the deadline go as with frozen time (`split`), and one at or after it meets the timeout (or, after a
    /// drain, the uncounted close) unless the connection had closed already.
    static func timed(_ input: [UInt8], _ pieces: [ArraySlice<UInt8>], split: Outcome) {
        guard !pieces.isEmpty else { return }
        let hash = fnv(input)
        let arrivals = pieces.indices.map { Instant(nanoseconds: UInt64($0 + 1) * second) }
        // All before the deadline: the split's frozen outcome.
        let early = outcome(input, pieces, arrivals: arrivals, timeout: UInt64(pieces.count + 1) * second)
        invariant(early == split, "time passing within the deadline changed the outcome")
        // The deadline at a piece's arrival: a timeout there, unless the connection closed before.
        let cut = Int(hash % UInt64(pieces.count))
        let late = outcome(input, pieces, arrivals: arrivals, timeout: UInt64(cut + 1) * second)
        let before = outcome(input, Array(pieces[..<cut]))
        if case .wait = before.last {
            invariant(late.last == .close(.timeout), "a deadline passed without ending the handshake")
        } else {
            invariant(late.last == before.last, "a deadline changed what came before it")
        }
        invariant(late.wrote == before.wrote, "the server wrote otherwise before the deadline")
        // A drain before a piece, its wait placed by the hash: the handshake ends uncounted at the wait's end.
        let drainAt = Int((hash >> 20) % UInt64(pieces.count))
        let drained = outcome(
            input, pieces, arrivals: arrivals, timeout: UInt64(pieces.count + 5) * second, drainAt: drainAt,
            drainWait: (hash >> 40) % 4 * second)
        invariant(drained.last != .close(.timeout), "a drained handshake was counted as a timeout")
    }
}
