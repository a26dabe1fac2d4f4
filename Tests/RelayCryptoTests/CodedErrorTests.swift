import ErrorCodes
import RelayCrypto
import Testing

/// The one error shape (ErrorCodes), through RelayCrypto's error: what callers and logs see of it.
@Suite struct CodedErrorTests {
    @Test func errorsAreEqualByCodeAndHashedByCodeWhateverTheirReasons() {
        let one = CryptoError(.invalidKey, "a key of 31 bytes")
        let other = CryptoError(.invalidKey, "a key of 33 bytes")
        #expect(one == other)
        #expect(one.hashValue == other.hashValue)
        #expect(one != CryptoError(.invalidNonce, "a key of 31 bytes"))
        #expect(Set([one, other, CryptoError(.invalidNonce, "")]).count == 2)
    }

    @Test func aDescriptionIsTheCodesNameAndTheReason() {
        let error = CryptoError(.invalidPEM, "no PEM block")
        #expect(error.description == "invalidPEM: no PEM block")
        #expect("\(error.code)" == "invalidPEM")
        #expect(error.code.name == "invalidPEM")
    }

    /// A code is opaque: a module's codes are its static members, and a code is its name within its domain.
    @Test func codesOfOneDomainCompareByName() {
        #expect(ErrorCode<CryptoErrorDomain>("invalidKey") == .invalidKey)
        #expect(CryptoError.Code.internalError != .signingFailed)
    }
}
