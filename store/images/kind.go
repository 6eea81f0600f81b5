package images

// Kind is an image kind: each has its own pair of tables.
type Kind int

// The image kinds.
const (
	Single Kind = iota + 1
	Pano
	PreStitch
)

// Kinds lists every image kind.
var Kinds = []Kind{Single, Pano, PreStitch}

// String names the kind as the API does.
func (k Kind) String() string {
	switch k {
	case Single:
		return "single"
	case Pano:
		return "pano"
	case PreStitch:
		return "pre-stitch"
	}
	return "unknown"
}

// DefaultTable is the primary table name the existing .NET system uses.
func (k Kind) DefaultTable() string {
	switch k {
	case Single:
		return "SingleImageMetadata"
	case Pano:
		return "PanoImageMetadata"
	case PreStitch:
		return "PreStitchImageMetadata"
	}
	return ""
}

// IndexTable is the name of the index table of a primary table: fixed, as in
// the .NET system, so the retention job finds it from the primary name alone.
func IndexTable(primary string) string { return primary + "Index" }

// HasPointers tells whether the kind has reads filtered by a property, which
// pointer rows bound (see PointerTable).
func (k Kind) HasPointers() bool { return k == Pano || k == PreStitch }
