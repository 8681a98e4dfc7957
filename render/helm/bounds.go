package helm

import (
	"fmt"
	"strconv"
	"strings"
)

// Bounds of the names Helm's --set parser (strvals) reads, checked before
// it allocates anything: a list index in a name makes a list that long
// (a[65535]), at every level it is written (a[65535][65535]…), so a few
// hundred bytes of name would allocate tens of megabytes.
const (
	MaxSetIndex = 1023
	// MaxSetItems bounds the list items all the names make.
	MaxSetItems = 1 << 16
)

// BoundedSetNames says why names (an Argo CD Application's parameters, a
// HelmRelease's valuesFrom targetPaths) are refused unparsed: a list index
// over MaxSetIndex, or more list items in all than MaxSetItems.
func BoundedSetNames(names []string) error {
	items := 0
	for _, name := range names {
		rest := name
		for {
			open := strings.IndexByte(rest, '[')
			if open < 0 {
				break
			}
			end := strings.IndexByte(rest[open:], ']')
			if end < 0 {
				break
			}
			n, err := strconv.Atoi(rest[open+1 : open+end])
			if err != nil || n < 0 {
				break // not an index: the parser says what is wrong
			}
			if n > MaxSetIndex {
				return fmt.Errorf("%.80s names list index %d, over the %d driftback renders", name, n, MaxSetIndex)
			}
			if items += n + 1; items > MaxSetItems {
				return fmt.Errorf("they make more than %d list items, which driftback does not render", MaxSetItems)
			}
			rest = rest[open+end+1:]
		}
	}
	return nil
}
