//go:build race

package render

// raceEnabled says the tests run under the race detector: a binary the tests
// build is built so too, from the packages the test binary already compiled.
const raceEnabled = true
