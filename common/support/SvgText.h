//===- SvgText.h - What the SVG pictures share ------------------*- C++ -*-===//
//
// The pieces every picture Tessel draws (schedules, memory profiles) writes the same way:
// escaped text, coordinates, and axis tick spacing.
//
//===----------------------------------------------------------------------===//
#ifndef TESSEL_COMMON_SUPPORT_SVGTEXT_H
#define TESSEL_COMMON_SUPPORT_SVGTEXT_H

#include <string>

namespace tessel::svg {

/// `text` as XML character data or an attribute value: markup characters escaped, the control
/// characters XML 1.0 does not allow left out.
std::string escapeXml(const std::string &text);

/// A coordinate with two decimals; a non-finite one (which a layout should never make) as 0,
/// so that the file stays valid.
std::string number(double value);

/// A tick spacing of 1, 2 or 5 times a power of ten giving about `count` ticks over `span`
/// (1 for an empty or non-finite span).
double tickStep(double span, int count);

} // namespace tessel::svg

#endif // TESSEL_COMMON_SUPPORT_SVGTEXT_H
