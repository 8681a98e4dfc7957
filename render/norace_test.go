//go:build !race

package render_test

// raceEnabled says the tests run under the race detector.
const raceEnabled = false
