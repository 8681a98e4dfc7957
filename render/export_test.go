package render

// FitMemory is fitMemory, for the tests of package render_test.
var FitMemory = fitMemory
