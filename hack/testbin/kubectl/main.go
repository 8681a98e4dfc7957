// Command kubectl is the upstream kubectl, built from the Go module proxy for
// the benchmarks' baselines (`kubectl diff --server-side`, `kubectl
// kustomize`). Tests never use it.
package main

import (
	"k8s.io/component-base/cli"
	"k8s.io/kubectl/pkg/cmd"
	"k8s.io/kubectl/pkg/cmd/util"
)

func main() {
	command := cmd.NewDefaultKubectlCommand()
	if err := cli.RunNoErrOutput(command); err != nil {
		util.CheckErr(err)
	}
}
