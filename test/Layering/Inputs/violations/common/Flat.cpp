// A file directly in common/, a folder no rule names.
#include <string>
