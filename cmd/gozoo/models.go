package main

import _ "github.com/gozoo/gozoo/zoo/all" // every model family
