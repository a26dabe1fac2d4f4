import Foundation

/// The build stages the documented `podman build` leaves untagged (`<none>`, the whole compiler image with the
/// release build in it): the run removes the ones it made and no other image. Picked from two listings of
/// `podman images --filter dangling=true --format json`, one taken before the build and one after: an untagged
/// image listed only after, and created since the build began (an older image that lost its tag meanwhile is not
/// the build's).
enum ContainerBuildStages {
    struct Listed: Equatable {
        var id: String
        /// Seconds since 1970.
        var created: Int
    }

    /// The untagged images a listing names (`[{"Id": ..., "Created": ...}]`); nil if it is not such a listing.
    static func parse(_ json: Data) -> [Listed]? {
        guard let images = (try? JSONSerialization.jsonObject(with: json)) as? [[String: Any]] else { return nil }
        return images.compactMap { image in
            guard let id = image["Id"] as? String, let created = image["Created"] as? Int else { return nil }
            return Listed(id: id, created: created)
        }
    }

    /// The IDs of the stages the build made: listed `after` it and not `before`, created at or after `since`.
    static func made(before: [Listed], after: [Listed], since: Int) -> [String] {
        let earlier = Set(before.map(\.id))
        return after.filter { !earlier.contains($0.id) && $0.created >= since }.map(\.id)
    }
}
