import FMDB
import Foundation
import TestSupport
import XCTest

/// FMDB's Tests/FMDatabaseQueueBindTests.m (FMDB 2.7.8+): statements prepared once with `prepare` and
/// bound again in many queue blocks, against the same work done with `executeUpdate`. FMDB measures
/// the two; here they are checked for the same result (speed is Scripts/bench's job).
final class FMDatabaseQueueBindTests: FMDBCipherTestCase {
    struct Fixture {
        let queue: FMDatabaseQueue
        let insert: FMResultSet
        let delete: FMResultSet
    }

    func makeFixture(_ mode: StorageMode) throws -> Fixture {
        let path = directory.path("\(mode)-bind.db")
        let queue = try mode.makeQueue(at: path)
        let statements: (FMResultSet?, FMResultSet?) =
            queue.inDatabase { db in
                db.executeUpdate(
                    "create table if not exists bd_tracker (track_id text, entire_log text, primary key(track_id))")
                return (
                    db.prepare("INSERT OR REPLACE INTO bd_tracker (track_id, entire_log) values (?,?)"),
                    db.prepare("DELETE From bd_tracker WHERE track_id = ?")
                )
            } ?? (nil, nil)
        return Fixture(queue: queue, insert: try XCTUnwrap(statements.0), delete: try XCTUnwrap(statements.1))
    }

    func valuesToTest() -> [(trackID: String, track: String)] {
        (0..<200).map { _ in (UUID().uuidString, #"{"event":"event_name","param":{"date":"current"}}"#) }
    }

    func trackIDs(_ queue: FMDatabaseQueue) -> [String] {
        queue.inDatabase { db -> [String] in
            var ids: [String] = []
            if let rs = db.executeQuery("SELECT * from bd_tracker") {
                while rs.next() { ids.append(rs.string(forColumn: "track_id") ?? "") }
            }
            return ids
        } ?? []
    }

    func testBindStyle() throws {
        for mode in StorageMode.allCases {
            let fixture = try makeFixture(mode)
            let values = valuesToTest()
            for value in values {
                fixture.queue.inDatabase { _ in
                    XCTAssertTrue(fixture.insert.bind(withArray: [value.trackID, value.track]))
                    XCTAssertTrue(fixture.insert.step(), "\(mode): the prepared insert runs again in every block")
                }
            }
            let ids = trackIDs(fixture.queue)
            XCTAssertEqual(Set(ids), Set(values.map(\.trackID)), "\(mode)")
            fixture.queue.inTransaction { _, _ in
                for id in ids {
                    XCTAssertTrue(fixture.delete.bind(withArray: [id]))
                    XCTAssertTrue(fixture.delete.step())
                }
            }
            XCTAssertEqual(trackIDs(fixture.queue), [], "\(mode): every row deleted through the reused statement")
            fixture.queue.inDatabase { db in
                fixture.insert.close()
                fixture.delete.close()
                XCTAssertFalse(db.hasOpenResultSets)
            }
            fixture.queue.close()
        }
    }

    func testOldStyle() throws {
        for mode in StorageMode.allCases {
            let fixture = try makeFixture(mode)
            let values = valuesToTest()
            for value in values {
                fixture.queue.inDatabase { db in
                    do {
                        try db.executeUpdate(
                            "INSERT OR REPLACE INTO bd_tracker (track_id, entire_log) values (?,?)",
                            values: [value.trackID, value.track])
                    } catch {
                        XCTFail("\(mode): \(error)")
                    }
                }
            }
            let ids = trackIDs(fixture.queue)
            XCTAssertEqual(ids.count, values.count, "\(mode)")
            let list = ids.map { "'\($0)'" }.joined(separator: ",")
            fixture.queue.inDatabase { db in
                XCTAssertTrue(db.executeUpdate("DELETE FROM bd_tracker WHERE track_id IN (\(list))"))
            }
            XCTAssertEqual(trackIDs(fixture.queue), [], "\(mode)")
            fixture.queue.close()
        }
    }
}
