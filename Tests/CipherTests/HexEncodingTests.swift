@testable import FMDB
import Foundation
import TestSupport
import XCTest

/// The library's one hexadecimal encoder, through each of its users: slot files (`Data.hexString`), key
/// bytes for the slot provider (`SecureBytes.hex`) and SQLCipher's raw-key literal.
final class HexEncodingTests: XCTestCase {
    let everyByte = Data(0...255)

    func expected(_ bytes: Data, _ format: String) -> String {
        bytes.map { String(format: format, $0) }.joined()
    }

    func text(_ bytes: SecureBytes) -> String {
        bytes.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }
    }

    func testEveryByteInBothCases() {
        XCTAssertEqual(everyByte.hexString, expected(everyByte, "%02x"))
        XCTAssertEqual(text(SecureBytes(everyByte).hex(.lowercase)), expected(everyByte, "%02x"))
        XCTAssertEqual(text(SecureBytes(everyByte).hex(.uppercase)), expected(everyByte, "%02X"))
        XCTAssertEqual(Data(hex: everyByte.hexString), everyByte)
        XCTAssertEqual(Data().hexString, "")
        XCTAssertEqual(text(SecureBytes(Data()).hex(.lowercase)), "")
    }

    func testSQLCipherLiteralIsUpperCaseKeyThenSalt() {
        let key = SecureBytes(Data([0x00, 0xAB, 0xFF]))
        XCTAssertEqual(text(key.sqlcipherHexLiteral()), "x'00ABFF'")
        XCTAssertEqual(text(key.sqlcipherHexLiteral(appending: SecureBytes(Data([0x1F])))), "x'00ABFF1F'")
    }
}
