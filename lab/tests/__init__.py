"""The lab's tests: a package (lab.tests), so that its conftest and test modules never take
the top-level names of tests/' (whose modules import `conftest`)."""
