package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestGoBuildKnowsItsCommit runs `driftback version` of a binary built as
// `go install ./cmd/driftback` builds it in a git checkout: the toolchain's
// record alone gives the commit, with no link-time stamp.
func TestGoBuildKnowsItsCommit(t *testing.T) {
	bin := driftbackBinary(t)
	head, err := exec.Command("git", "-C", filepath.Join("..", ".."), "rev-parse", "HEAD").Output()
	if err != nil {
		t.Skipf("not a git checkout: %v", err)
	}
	out, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("driftback version: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "commit "+strings.TrimSpace(string(head))) {
		t.Errorf("driftback version does not name the checkout's commit %s:\n%s", head, out)
	}
	if strings.Contains(string(out), "(devel)") {
		t.Errorf("driftback version says (devel) although the toolchain recorded the version:\n%s", out)
	}
}

// TestVersionAndHelpSkipTheProgramsStartUp: `driftback version`, `--help`
// and the completion scripts' first word are answered by quick's init,
// before Helm, client-go, the apiserver's libraries, kustomize or
// driftback's packages that use them initialise (GODEBUG=inittrace=1 lists
// each package the process initialised), and say what the program holds:
// the usage every command, the completion each command's name.
func TestVersionAndHelpSkipTheProgramsStartUp(t *testing.T) {
	bin := driftbackBinary(t)
	initialised := func(args ...string) (stdout, stderr string, pkgs []string, code int) {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		if exit, ok := err.(*exec.ExitError); ok {
			code = exit.ExitCode()
		} else if err != nil {
			t.Fatalf("%v: %v\n%s", args, err, errOut.String())
		}
		for _, m := range initLine.FindAllStringSubmatch(errOut.String(), -1) {
			pkgs = append(pkgs, m[1])
		}
		return out.String(), initLine.ReplaceAllString(errOut.String(), ""), pkgs, code
	}
	// The whole program: version with a flag is the command's to answer.
	_, _, all, _ := initialised("version", "-h")
	heavy := []string{"helm.sh/", "k8s.io/api/", "k8s.io/apiserver/", "k8s.io/kubernetes/", "k8s.io/client-go/kubernetes",
		"sigs.k8s.io/controller-runtime/pkg/client/apiutil", "sigs.k8s.io/kustomize/", "github.com/driftback/driftback/app",
		"github.com/driftback/driftback/drift", "github.com/driftback/driftback/reconcile", "github.com/driftback/driftback/render"}
	light := []string{"github.com/driftback/driftback/cmd/driftback/internal/quick", "github.com/driftback/driftback/render/childbin"}
	var names []string
	for _, c := range commands() {
		names = append(names, c.name)
	}
	for _, args := range [][]string{{"version"}, {"--version"}, {"--help"}, {"-h"}, {"help"}, {"__complete"}} {
		stdout, stderr, pkgs, code := initialised(args...)
		var named []string
		for _, p := range pkgs {
			for _, h := range heavy {
				if strings.HasPrefix(p, h) && !slices.Contains(light, p) {
					named = append(named, p)
				}
			}
		}
		if len(named) > 0 || len(pkgs) == 0 || len(pkgs) > len(all)/2 {
			t.Errorf("%v initialised %d packages (the program: %d), these among them: %v", args, len(pkgs), len(all), named)
		}
		switch {
		case code != exitOK:
			t.Errorf("%v: exit %d", args, code)
		case strings.Contains(args[0], "version"):
			// What TestGoBuildKnowsItsCommit checks of the version, in the
			// lines the program prints.
			if !versionLines.MatchString(stdout) || stderr != "" {
				t.Errorf("%v printed\n%s%s", args, stdout, stderr)
			}
		case args[0] == "__complete":
			if stdout != strings.Join(names, "\n")+"\n" {
				t.Errorf("the completion's commands are\n%s\nwhere the program has %v", stdout, names)
			}
		default:
			for _, c := range commands() {
				if !strings.Contains(stderr, "\n  "+c.name+" ") || !strings.Contains(stderr, c.summary) {
					t.Errorf("%v: the usage does not list %s:\n%s", args, c.name, stderr)
				}
			}
		}
	}
	// Without a command: the usage, and exit 2.
	if _, stderr, _, code := initialised(); code != exitError || !strings.Contains(stderr, "Usage: driftback COMMAND") {
		t.Errorf("no command: exit %d\n%s", code, stderr)
	}
}

var (
	initLine     = regexp.MustCompile(`(?m)^init (\S+) @.*\n`)
	versionLines = regexp.MustCompile(`^driftback \S+\ncommit .+\ngo1\.\S+ \w+/\w+\nrender child .+\n$`)
)
