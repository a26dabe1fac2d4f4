import Foundation

/// The build stages the documented `podman build` leaves untagged (`<none>`, the compiler image with the release
/// build in it): the run removes what its build made and no other image. What the build made: an image
/// `podman images --all --format json` lists after it and not before, created since the build began (an older
/// image that only lost its tag meanwhile is not the build's). The stage goes first; then each of the build's own
/// layers under it that no image uses any more (podman then lists it as dangling), down to the first one that was
/// there before, which stays as the next build's cache.
enum ContainerBuildStages {
    struct Listed: Equatable {
        var id: String
        /// Seconds since 1970.
        var created: Int
    }

    /// The images a listing names (`[{"Id": ..., "Created": ...}]`); nil if it is not such a listing.
    static func parse(_ json: Data) -> [Listed]? {
        guard let images = (try? JSONSerialization.jsonObject(with: json)) as? [[String: Any]] else { return nil }
        return images.compactMap { image in
            guard let id = image["Id"] as? String, let created = image["Created"] as? Int else { return nil }
            return Listed(id: id, created: created)
        }
    }

    /// The IDs of the images the build made: listed `after` it and not `before`, created at or after `since`.
    static func made(before: [Listed], after: [Listed], since: Int) -> Set<String> {
        let earlier = Set(before.map(\.id))
        return Set(after.filter { !earlier.contains($0.id) && $0.created >= since }.map(\.id))
    }

    /// What to remove now: the dangling images (`podman images --filter dangling=true`) the build made.
    static func removable(dangling: [Listed], made: Set<String>) -> [String] {
        dangling.map(\.id).filter { made.contains($0) }
    }
}
