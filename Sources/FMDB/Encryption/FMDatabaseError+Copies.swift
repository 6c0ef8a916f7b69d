extension FMDatabaseError {
    /// Why a ``FMDatabaseCopy`` refused or failed, when the copy itself decided it (DEST exists, SRC is
    /// damaged, the copy did not verify, ...); nil for an error SQLite or the file system reported, whose
    /// code says what happened.
    public var copyFailure: FMDatabaseCopy.Failure? {
        (userInfo[FMDatabaseCopy.Failure.userInfoKey] as? String).flatMap(FMDatabaseCopy.Failure.init(rawValue:))
    }

    /// An error a copy decided, `copyFailure` recorded (nil: none).
    convenience init(code: Int32, message: String?, marks: [Mark], copyFailure: FMDatabaseCopy.Failure?) {
        self.init(
            code: code, message: message, marks: marks,
            details: copyFailure.map { [FMDatabaseCopy.Failure.userInfoKey: $0.rawValue] } ?? [:])
    }
}
