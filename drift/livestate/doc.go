// Package livestate reads a cluster's live state for the comparison, only
// ever with get, list and watch: a ClusterReader (client-go, discovery and
// the apply schema from OpenAPI), a Watcher (informer caches the drift loop
// keeps, holding what it compares and little else), a Snapshot (the reads a
// round of comparisons needs, planned and made up front), a DirReader (a
// folder of objects dumped from a cluster) and ServerDryRun (the apiserver's
// own dry-run apply, for clusters that ask for it). Each is an
// object.LiveReader.
package livestate
