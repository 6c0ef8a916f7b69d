import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import NotesStore
import Synchronization

/// A note the service acknowledged (201): it must be in the database, as posted, at the end.
struct AcknowledgedNote: Sendable {
    var id: Int64
    var title: String
    var body: String
}

/// One request as a client saw it, after the retries a well-behaved client makes on 503 with Retry-After.
struct RequestRecord: Sendable {
    enum Kind: Sendable { case create, read, list }
    var kind: Kind
    var started: ContinuousClock.Instant
    var ended: ContinuousClock.Instant
    /// The final status; 0 when the connection failed.
    var status: Int
    /// How many 503 answers the client waited out before the final one.
    var retriedUnavailable: Int

    var succeeded: Bool { (200..<300).contains(status) }
    var duration: Duration { ended - started }
}

struct LoadReport: Sendable {
    var records: [RequestRecord] = []
    var acknowledged: [AcknowledgedNote] = []
    /// Reads that did not return what was acknowledged (wrong content, or 404 for an acknowledged note).
    var mismatches: [String] = []
}

/// Concurrent HTTP clients on the live server: each creates a note, reads back one of its acknowledged notes,
/// and every tenth round lists notes, until it has made `rounds` rounds or the deadline passed.
final class LoadRun: Sendable {
    let port: Int
    let clients: Int
    let rounds: Int
    let deadline: ContinuousClock.Instant
    /// Rounds done so far, by all clients: the test starts its operator action after a warm-up.
    let completedRounds = Atomic<Int>(0)

    init(port: Int, clients: Int = 8, rounds: Int = 250, deadline: ContinuousClock.Instant) {
        self.port = port
        self.clients = clients
        self.rounds = rounds
        self.deadline = deadline
    }

    private struct NoteReply: Decodable {
        var id: Int64
        var title: String
        var body: String
    }

    func run() async -> LoadReport {
        await withTaskGroup(of: LoadReport.self) { group in
            for client in 0..<clients {
                group.addTask { await self.runClient(client) }
            }
            var total = LoadReport()
            for await report in group {
                total.records += report.records
                total.acknowledged += report.acknowledged
                total.mismatches += report.mismatches
            }
            return total
        }
    }

    private func runClient(_ number: Int) async -> LoadReport {
        var report = LoadReport()
        let client = TestClient(host: "localhost", port: port)
        client.connect()
        var generator = SystemRandomNumberGenerator()
        for round in 0..<rounds where ContinuousClock.now < deadline {
            let title = "client \(number) round \(round)"
            let body = String(
                repeating: "note \(number)/\(round) ", count: 1 + Int.random(in: 0..<60, using: &generator))
            let posted = #"{"title":"\#(title)","body":"\#(body)"}"#
            let (record, reply) = await send(client, .create, .post, "/notes", body: posted)
            report.records.append(record)
            if record.status == 0 { break }
            if record.status == 201 {
                if let note = try? JSONDecoder().decode(NoteReply.self, from: Data(buffer: reply)),
                    note.title == title, note.body == body
                {
                    report.acknowledged.append(AcknowledgedNote(id: note.id, title: title, body: body))
                } else {
                    report.mismatches.append("POST answered 201 with another note: \(String(buffer: reply))")
                }
            }
            if let expected = report.acknowledged.randomElement(using: &generator) {
                let (record, reply) = await send(client, .read, .get, "/notes/\(expected.id)")
                report.records.append(record)
                if record.status == 0 { break }
                if record.status == 200 {
                    let note = try? JSONDecoder().decode(NoteReply.self, from: Data(buffer: reply))
                    if note?.title != expected.title || note?.body != expected.body {
                        report.mismatches.append("note \(expected.id) read back as \(String(buffer: reply))")
                    }
                } else if record.status == 404 {
                    report.mismatches.append("acknowledged note \(expected.id) not found")
                }
            }
            if round % 10 == 0 {
                let after = max(0, (report.acknowledged.last?.id ?? 0) - 20)
                let (record, _) = await send(client, .list, .get, "/notes?after=\(after)&limit=20")
                report.records.append(record)
                if record.status == 0 { break }
            }
            completedRounds.add(1, ordering: .relaxed)
        }
        try? await client.shutdown()
        return report
    }

    /// Sends one request; on 503 waits what Retry-After says and sends it again, up to 5 times. Status 0 when
    /// the connection failed (the client then stops).
    private func send(
        _ client: TestClient, _ kind: RequestRecord.Kind, _ method: HTTPRequest.Method, _ uri: String,
        body: String? = nil
    ) async -> (RequestRecord, ByteBuffer) {
        let started = ContinuousClock.now
        var retried = 0
        while true {
            var headers: HTTPFields = [:]
            if body != nil { headers[.contentType] = "application/json" }
            let request = TestClient.Request(
                uri, method: method, authority: "localhost", headers: headers, body: body.map { ByteBuffer(string: $0) }
            )
            guard let response = try? await client.execute(request) else {
                let record = RequestRecord(
                    kind: kind, started: started, ended: .now, status: 0, retriedUnavailable: retried)
                return (record, ByteBuffer())
            }
            let status = response.status.code
            if status == 503, retried < 5 {
                retried += 1
                let seconds = response.headers[.retryAfter].flatMap(Int.init) ?? 1
                try? await Task.sleep(for: .seconds(seconds))
                continue
            }
            let record = RequestRecord(
                kind: kind, started: started, ended: .now, status: status, retriedUnavailable: retried)
            return (record, response.body ?? ByteBuffer())
        }
    }
}
