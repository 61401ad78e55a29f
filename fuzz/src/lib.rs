//! Placeholder for forksafe's fuzz targets; they come with issue 5.
