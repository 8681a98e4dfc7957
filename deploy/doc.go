// Package deploy holds driftback's Kubernetes manifests; its tests prove they apply and that the role they grant is read-only.
package deploy
