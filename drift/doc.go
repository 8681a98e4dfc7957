// Package drift compares desired objects (a render) with a live cluster and says
// what a sync would do: objects created, changed and pruned, the fields that
// change and who set them live, what already drifted from Git, and what is
// dangerous about it. It reads the cluster only (get, list, watch); the default
// mode predicts a server-side apply locally.
//
// Objects, fields and the apply prediction are in drift/object; the readers
// of a live cluster (planned reads, watch caches, a dump folder, the
// apiserver's dry run) in drift/livestate.
package drift
