// Package remote downloads the url providers and rule sets of a
// configuration and keeps the last good copy of each on disk.
//
// It knows HTTP, files and a dial function, nothing of outbounds or of the
// supervisor: every connection of a download is opened by the Dial the
// caller gives (cmd routes it through the resource's download_via target).
//
// A download (Fetcher.Fetch) is one HTTP(S) GET with If-None-Match and
// If-Modified-Since from the cached copy's meta; a 304 is "not modified"
// and reads no body. It runs under a whole-download deadline
// (DefaultTimeout) and a deadline for the response header
// (DefaultHeaderTimeout), and its body under a size limit (32 MiB for a
// provider, 64 MiB for a rule set): a larger body is an error naming the
// limit. gzip is accepted and the limit applies to the decompressed body.
// The User-Agent is mihomo's subscription fetcher's ("clash.meta/..."),
// since subscription servers choose the format they answer by it. A
// download that runs past ProgressAfter logs its progress every
// ProgressEvery.
//
// The cache: the body at CachePath, and its meta (ETag, Last-Modified,
// when it was fetched and when its content last changed, its SHA-256, the
// subscription-userinfo header) in CachePath + ".meta.json"; both written
// atomically (a temporary file renamed over the old), mode 0600, folders
// created. A body whose SHA-256 is the cached one's is unchanged. A
// changed body that fails the resource's Validate never replaces the
// cache: the error says why, and the previous copy (and the nodes or rules
// loaded from it) stays.
//
// The Updater schedules every resource on a goroutine of its own, which
// it owns: at start a resource with no cached copy, or one older than its
// interval, is downloaded at once, then every interval (0: at start and on
// demand only). A failed download is retried after 10 s, doubling with
// each failure up to the smaller of the interval and 10 minutes: a server
// that is down for a moment is asked again soon, one that stays down is
// not hammered (subscription servers rate-limit and ban), and a retry
// never comes later than the next regular download would. On changed
// content the cache is written, then OnChange runs (cmd re-applies the
// running configuration, which reads the new copy). Readers get a
// published snapshot (Status), never a lock a download holds.
package remote
