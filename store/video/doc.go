// Package video is the repository of video recording metadata.
//
// Recordings live in one table (VideoMetadata by default, the .NET system's
// VideoMetadataTableName), partitioned by camera, with the inverted .NET
// ticks of the recording's start as row key, as for images: a camera's
// newest recording is its first row and a time range is one row range of
// one partition. Unlike images there is no index table: the .NET system
// keeps none, since nothing retires recordings by age across cameras.
package video
