// Package reconciler prepares a repository tree as a reconciler does before
// kustomize builds it: Flux's kustomize-controller (the kustomization file
// it generates or rewrites, postBuild substitution) and Argo CD's
// repo-server (kustomize options, directory sources, the source type it
// detects). The result is a render.Tree rendered like any overlay, in the
// sandboxed child; nothing here runs kustomize or reads outside the tree.
package prepare
