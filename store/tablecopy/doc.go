// Package tablecopy copies tables from one backend to another: the embedded
// store to Azure Table Storage, or back.
//
// Tables are copied one after the other in the order given, so a caller
// that lists each index table before its primary table keeps the
// dual-table invariant at every moment of the copy: no primary row reaches
// the target before its index row. Rows are written as upserts, in batches
// of up to 100 rows of one partition (one Azure entity-group transaction
// each), so a row copied twice is the same row. After every page of rows the
// copy records its position in the target's progress table, so a copy
// interrupted anywhere resumes from its last position, and a copy run again
// after it finished writes nothing. At the end, each table's row count and a
// sample of its rows are compared between the source and the target.
//
// The copy reads each table once, in key order, as the source serves it:
// a row written to the source behind the copy's position is not copied, and
// a row deleted from it after it was copied stays in the target. Copy from
// a store no one writes (a stopped server, a restored backup) for an exact
// copy.
package tablecopy
