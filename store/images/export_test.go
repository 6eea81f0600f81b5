package images

// ParseIndexKey exposes parseIndexKey to the package's external tests.
var ParseIndexKey = parseIndexKey
