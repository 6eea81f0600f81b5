// Package images is the dual-table repository of image metadata.
//
// Each image kind (single, pano, pre-stitch) has a primary table partitioned
// by camera, with inverted-tick row keys so a camera's newest image is its
// first row, and an index table partitioned by capture minute, so retention
// finds every expired image with one range scan over partition keys whatever
// the number of cameras. Every create writes both rows; no create may leave a
// primary row without its index row, since such a row would escape retention
// forever. The three kinds share this one code path and differ only in the
// table names and the one extra property each carries. Pano and pre-stitch
// keep a third table of pointer rows that bound their filtered reads (see
// PointerTable). Where one transaction writes both rows (the embedded
// store), the index row carries the image as well, so the fleet at a
// moment reads a minute's images from the index alone (WalkIndex); on Azure
// it holds only its way back to the primary row, as the .NET system's.
package images
