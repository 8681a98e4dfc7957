//go:build !race

package render

// raceEnabled says the tests run under the race detector.
const raceEnabled = false
