package config

import "testing"

// FuzzParseConfig: any app.yml is loaded or refused with an error naming
// the problem, never a panic.
func FuzzParseConfig(f *testing.F) {
	for _, s := range []string{
		"server:\n  listen: \":1\"\n",
		"clusters:\n  a:\n    kubeconfig: /x\n    qps: 1.5\n    burst: 3\ntargets:\n- repo: o/r\n  path: p\n  cluster: a\n",
		"targets:\n- repo: o/r\n  path: p\n  cluster: missing\n",
		"github:\n  privateKey: x\n",
		"server: [\n",
		"a: &a [*a]\n",
		"targets: {x: y}\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if _, err := ParseConfig(b, func(string) string { return "" }); err != nil && err.Error() == "" {
			t.Fatal("an error without a message")
		}
	})
}
