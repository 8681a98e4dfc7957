// Command kube-apiserver is the upstream API server, built from the Go module proxy
// so that tests run against a real control plane without downloading binaries.
package main

import (
	"os"

	_ "time/tzdata" // the apiserver parses time zones in CronJob specs

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() {
	os.Exit(cli.Run(app.NewAPIServerCommand()))
}
