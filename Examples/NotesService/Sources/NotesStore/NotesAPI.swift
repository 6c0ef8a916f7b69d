import Hummingbird
import Logging

/// The HTTP API: `POST /notes`, `GET /notes/{id}`, `GET /notes?after=ID&limit=N`, `DELETE /notes/{id}`,
/// `GET /health`.
public func makeRouter(store: NotesStore, logger: Logger) -> Router<BasicRequestContext> {
    let router = Router()
    router.get("health") { _, _ -> Health in
        try await answering(logger: logger) { try await store.checkHealth() }
    }
    let notes = router.group("notes")
    notes.post { request, context -> EditedResponse<Note> in
        let new = try await request.decode(as: NewNote.self, context: context)
        guard !new.title.isEmpty, new.title.utf8.count <= 200, new.body.utf8.count <= 64 * 1024 else {
            throw HTTPError(.badRequest, message: "a title of 1 to 200 bytes and a body of at most 64 KiB")
        }
        let note = try await answering(logger: logger) { try await store.create(new) }
        return EditedResponse(status: .created, headers: [.location: "/notes/\(note.id)"], response: note)
    }
    notes.get { request, _ -> [Note] in
        let after = request.uri.queryParameters.get("after", as: Int64.self) ?? 0
        let limit = min(max(request.uri.queryParameters.get("limit", as: Int.self) ?? 50, 1), 500)
        return try await answering(logger: logger) { try await store.notes(after: after, limit: limit) }
    }
    notes.get(":id") { _, context -> Note in
        let id = try context.parameters.require("id", as: Int64.self)
        guard let note = try await answering(logger: logger, { try await store.note(id: id) }) else {
            throw HTTPError(.notFound)
        }
        return note
    }
    notes.delete(":id") { _, context -> HTTPResponse.Status in
        let id = try context.parameters.require("id", as: Int64.self)
        let deleted = try await answering(logger: logger) { try await store.delete(id: id) }
        return deleted ? .noContent : .notFound
    }
    return router
}
