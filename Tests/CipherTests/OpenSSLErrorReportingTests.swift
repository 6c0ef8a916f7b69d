import CFMDBCryptoSelfTest
@testable import FMDB
import Foundation
import TestSupport
import XCTest

/// A failed OpenSSL call is reported (one line per entry of OpenSSL's error queue, at error level on the
/// "fmdb" logger, as SQLCipher's own provider logs them) and leaves the thread's queue empty: in the
/// crypto provider's C code and in the library's Swift wrappers.
final class OpenSSLErrorReportingTests: FMDBCipherTestCase {
    let reported = Locked<[String]>([])

    override func setUpWithError() throws {
        try super.setUpWithError()
        let reported = self.reported
        OpenSSLErrors.setReportObserver { line in reported.withLock { $0.append(line) } }
    }

    override func tearDown() {
        OpenSSLErrors.setReportObserver(nil)
        super.tearDown()
    }

    /// scrypt allowed less memory than its parameters need: OpenSSL refuses it and queues why.
    func testAFailedWrapperCallIsReportedAndLeavesTheQueueEmpty() {
        XCTAssertThrowsError(
            try KeyDerivation.scrypt(
                SecureBytes(utf8: "secret"), salt: Data(count: 16), n: 1024, r: 8, p: 1, maxMemory: 1024))
        XCTAssertTrue(OpenSSLErrors.isQueueEmpty, "ERR_peek_error() != 0 after the failure")
        let lines = reported.withLock { $0 }
        XCTAssertFalse(lines.isEmpty, "nothing reported")
        XCTAssertTrue(lines.allSatisfy { $0.hasPrefix("OpenSSL error in EVP_PBE_scrypt: error:") }, "\(lines)")
    }

    func testAFailedProviderCallIsReportedAndLeavesTheQueueEmpty() throws {
        guard CryptoProviderRegistration.isActive else {
            throw XCTSkip("the library's crypto provider is not registered (FMDB_CRYPTO_PROVIDER, or its SQLCipher)")
        }
        let before = CryptoProviderRegistration.openSSLFailures
        XCTAssertNotEqual(fmdb_crypto_selftest_failing_call(), 0, "the provider accepted a negative length")
        XCTAssertTrue(OpenSSLErrors.isQueueEmpty, "ERR_peek_error() != 0 after the failure")
        XCTAssertEqual(CryptoProviderRegistration.openSSLFailures, before + 1)
        let lines = reported.withLock { $0 }
        XCTAssertEqual(lines.count, 1, "\(lines)")
        XCTAssertTrue(lines.first?.hasPrefix("OpenSSL error in fmdb_crypto_cipher: error:") == true, "\(lines)")
        XCTAssertTrue(lines.first?.contains("passed invalid argument") == true, "\(lines)")
    }

    /// A tag that does not verify (a wrong key) is an answer, not a failure: nothing is reported, and the
    /// queue is empty.
    func testAWrongKeyIsNotReported() throws {
        let key = SecureBytes(Data(repeating: 1, count: 32))
        let sealed = try AuthenticatedEncryption.seal(
            SecureBytes(utf8: "data key"), key: key, aad: Data(), nonceLength: 12, tagLength: 16)
        let opened = try AuthenticatedEncryption.open(
            ciphertext: sealed.ciphertext, nonce: sealed.nonce, tag: sealed.tag,
            key: SecureBytes(Data(repeating: 2, count: 32)), aad: Data())
        XCTAssertNil(opened)
        XCTAssertTrue(OpenSSLErrors.isQueueEmpty)
        XCTAssertEqual(reported.withLock { $0 }, [])
    }
}
